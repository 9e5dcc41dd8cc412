package jsonstrict

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/apierror"
)

// Error is a document a check refused. Message names the place; Path is
// that place alone ("" for the document as a whole, or where the place
// could not be found).
type Error struct {
	Path    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Invalid is err as its caller answers it: nil for nil, a 400 naming the
// place for an *Error (a document a check refused), and any other error,
// which a check returns only for a document that is not valid JSON (its
// caller checked that first, so a bug of its own), wrapped with what.
func Invalid(err error, what string) error {
	var se *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return apierror.Invalid(se.Path, "%s", se.Message)
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}

// refuse is an *Error whose message is format with args.
func refuse(path, format string, args ...any) *Error {
	return &Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

// CheckUTF8 refuses data that is not UTF-8, naming the byte offset of the
// first invalid byte and, when data can be read that far, the field whose
// value holds it. what names the document in the message ("the request
// body").
func CheckUTF8(data []byte, what string) error {
	if utf8.Valid(data) {
		return nil
	}
	off := 0
	for off < len(data) {
		r, size := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		off += size
	}
	if path, ok := ValuePathAt(data, int64(off)); ok && path != "" {
		return refuse(path, "field %q holds invalid UTF-8 at byte offset %d: %s must be UTF-8", path, off, what)
	}
	return refuse("", "invalid UTF-8 at byte offset %d: %s must be UTF-8", off, what)
}

// CheckUnambiguous walks data, a valid JSON document that decodes into a
// value of type t (nil: free-form JSON), and refuses a key given twice in
// one object, and an escaped lone surrogate in a string. In an object that
// decodes into a struct, keys that name the same field count as the same
// key whatever their case ("input" and "Input": encoding/json matches
// field names case-insensitively, so the second would overwrite the
// first); elsewhere (maps, free-form JSON, a type that decodes itself) keys
// are compared exactly, after unescaping ("a" and "\u0061" are the same
// key). On data that is not valid JSON it returns the decoder's error, not
// an *Error: check that first (decode it, or json.Valid).
func CheckUnambiguous(data []byte, t reflect.Type) error {
	return check(data, t, false)
}

// CheckExact is CheckUnambiguous, and also refuses a key that names a
// struct field in another case than the field's own ("Tools" alone, or
// "toolſ", for "tools"): encoding/json reads it as the field, where a
// case-sensitive reader (a policy's expression, the web UI, jq) sees
// another key, and the document would be read two ways. For documents a
// model writes (a spawn's agent_spec), which no client's convenience
// excuses.
func CheckExact(data []byte, t reflect.Type) error {
	return check(data, t, true)
}

func check(data []byte, t reflect.Type, exact bool) error {
	if off, ok := loneSurrogate(data); ok {
		if path, found := ValuePathAt(data, int64(off)); found && path != "" {
			return refuse(path, "field %q holds an escaped lone surrogate at byte offset %d: it is not valid UTF-16, and would not survive as text", path, off)
		}
		return refuse("", "an escaped lone surrogate at byte offset %d: it is not valid UTF-16, and would not survive as text", off)
	}
	w := &dupWalker{dec: json.NewDecoder(bytes.NewReader(data)), exact: exact}
	w.dec.UseNumber()
	err := w.value(t, nil)
	var dup *duplicateKeyError
	if errors.As(err, &dup) {
		if dup.field != "" {
			return refuse(dup.path, "key %q names the field %q in another case: write it as the field is named", dup.path, dup.field)
		}
		if dup.same != dup.key {
			return refuse(dup.path, "duplicate key %q: %q names the same field, given earlier in the object", dup.path, dup.same)
		}
		return refuse(dup.path, "duplicate key %q: each key may be given once in an object", dup.path)
	}
	return err
}

// duplicateKeyError is the second occurrence of a key: its path, the key
// as given, and the earlier key it repeats (the same, or another case of a
// struct field's name); or, with field set, a key that names that struct
// field in another case (CheckExact).
type duplicateKeyError struct{ path, key, same, field string }

func (e *duplicateKeyError) Error() string { return "duplicate key " + e.path }

type dupWalker struct {
	dec   *json.Decoder
	exact bool // a struct field's name only in its own case (CheckExact)
}

// value reads one value that decodes into t (nil: free-form JSON).
func (w *dupWalker) value(t reflect.Type, path *lazyPath) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && opaque(t) {
		t = nil // decodes itself: its keys are compared exactly
	}
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if delim == '[' {
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(elem, path.index(i)); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
		return err
	}
	var fields []jsonField
	var elem reflect.Type
	switch {
	case t != nil && t.Kind() == reflect.Struct:
		fields = jsonFields(t)
	case t != nil && t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	seen := make(map[string]string) // the name compared -> the key as first given
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		name, ft := key, elem
		if fields != nil {
			if f, ok := findField(fields, key); ok {
				if w.exact && f.name != key {
					return &duplicateKeyError{path: path.key(key).String(), key: key, field: f.name}
				}
				name, ft = f.name, f.typ
			} else {
				ft = nil
			}
		}
		if first, dup := seen[name]; dup {
			return &duplicateKeyError{path: path.key(key).String(), key: key, same: first}
		}
		seen[name] = key
		if err := w.value(ft, path.key(key)); err != nil {
			return err
		}
	}
	_, err = w.dec.Token()
	return err
}

// loneSurrogate returns the byte offset of the first \uXXXX escape in a
// string of data (valid JSON) that is half of a UTF-16 surrogate pair
// without its other half.
func loneSurrogate(data []byte) (int, bool) {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(data) && data[i+1] == 'u' {
				r, ok := hex4(data, i+2)
				switch {
				case !ok:
				case r >= 0xD800 && r <= 0xDBFF:
					// A high half must be followed by a low half.
					if i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
						if lo, ok := hex4(data, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
							i += 11
							continue
						}
					}
					return i, true
				case r >= 0xDC00 && r <= 0xDFFF:
					return i, true
				}
				i += 5
				continue
			}
			i++ // the escaped character
		}
	}
	return 0, false
}

// hex4 parses the four hex digits at data[i:i+4].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
