package jsonstrict

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
)

// encoding/json names a wrong-typed field without array indices
// ("agent_spec.tools.effect") and an unknown field by its last key only.
// These walkers re-read the (syntactically valid) document token by token
// to name the exact place: "agent_spec.tools[1].effect". They run on a
// document that already failed, or to name the place of a check's
// refusal, and fall back to encoding/json's names if they cannot find the
// place.

// errFound stops a walk once the place is found.
var errFound = errors.New("found")

// ValuePathAt returns the path of the value whose first token ends at or
// spans byte offset off: where encoding/json reports an UnmarshalTypeError
// (just after a scalar, or just after the '{' or '[' of a composite). The
// root is "".
func ValuePathAt(data []byte, off int64) (string, bool) {
	w := &offsetWalker{dec: json.NewDecoder(bytes.NewReader(data)), target: off}
	w.dec.UseNumber()
	if err := w.value(""); errors.Is(err, errFound) {
		return w.found, true
	}
	return "", false
}

type offsetWalker struct {
	dec    *json.Decoder
	target int64
	found  string
}

func (w *offsetWalker) value(path string) error {
	start := w.dec.InputOffset()
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	if end := w.dec.InputOffset(); start < w.target && w.target <= end {
		w.found = path
		return errFound
	}
	switch tok {
	case json.Delim('{'):
		for w.dec.More() {
			key, err := w.dec.Token()
			if err != nil {
				return err
			}
			k, _ := key.(string)
			if err := w.value(joinKey(path, k)); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
		return err
	case json.Delim('['):
		for i := 0; w.dec.More(); i++ {
			if err := w.value(joinIndex(path, i)); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
		return err
	}
	return nil
}

// UnknownFieldPath returns the path of the first key in data that names no
// field of the struct type t describes (following t into nested structs,
// maps, slices and pointers), as encoding/json's DisallowUnknownFields
// reports it. name is the key encoding/json reported (UnknownFieldName);
// if the walk finds another (it should not), or none, name alone is
// returned.
func UnknownFieldPath(data []byte, t reflect.Type, name string) string {
	w := &fieldWalker{dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	if err := w.value(t, ""); errors.Is(err, errFound) && w.foundKey == name {
		return w.found
	}
	return name
}

// UnknownFieldName extracts the key from encoding/json's
// DisallowUnknownFields error, which has no type of its own:
// `json: unknown field "name"`.
func UnknownFieldName(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	rest, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "", false
	}
	name, uerr := strconv.Unquote(rest)
	if uerr != nil {
		return "", false
	}
	return name, true
}

type fieldWalker struct {
	dec      *json.Decoder
	found    string // path of the unknown key
	foundKey string // the key itself
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// opaque reports whether values of t decode themselves (json.RawMessage,
// time.Time, ...) or take any JSON (interfaces): nothing inside them is an
// unknown field.
func opaque(t reflect.Type) bool {
	if t.Kind() == reflect.Interface {
		return true
	}
	pt := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshalerType) || pt.Implements(jsonUnmarshalerType) ||
		t.Implements(textUnmarshalerType) || pt.Implements(textUnmarshalerType)
}

func (w *fieldWalker) value(t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	delim, isDelim := tok.(json.Delim)
	if !isDelim {
		return nil // a scalar holds no keys
	}
	if t == nil || opaque(t) {
		return w.skipRest()
	}
	switch {
	case delim == '{' && t.Kind() == reflect.Struct:
		fields := jsonFields(t)
		for w.dec.More() {
			key, err := w.dec.Token()
			if err != nil {
				return err
			}
			k, _ := key.(string)
			ft, ok := lookupField(fields, k)
			if !ok {
				w.found, w.foundKey = joinKey(path, k), k
				return errFound
			}
			if err := w.value(ft, joinKey(path, k)); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
		return err
	case delim == '{' && t.Kind() == reflect.Map:
		for w.dec.More() {
			key, err := w.dec.Token()
			if err != nil {
				return err
			}
			k, _ := key.(string)
			if err := w.value(t.Elem(), joinKey(path, k)); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
		return err
	case delim == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i := 0; w.dec.More(); i++ {
			if err := w.value(t.Elem(), joinIndex(path, i)); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
		return err
	default:
		// A composite where t wants something else: a type error, not an
		// unknown field.
		return w.skipRest()
	}
}

// skipRest consumes the rest of a composite value whose opening delimiter
// was just read.
func (w *fieldWalker) skipRest() error {
	for depth := 1; depth > 0; {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

// jsonField is one key a struct accepts.
type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists the keys struct type t accepts, following encoding/json's
// rules closely enough for naming an unknown key and for telling which keys
// name one field: tag names, "-" skipped, unexported fields skipped,
// untagged embedded structs promoted.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				out = append(out, jsonFields(et)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: ft})
	}
	return out
}

// lookupField finds key among fields the way encoding/json does: an exact
// match first, then a case-insensitive one.
func lookupField(fields []jsonField, key string) (reflect.Type, bool) {
	f, ok := findField(fields, key)
	return f.typ, ok
}

// findField is lookupField returning the field itself.
func findField(fields []jsonField, key string) (jsonField, bool) {
	for _, f := range fields {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return jsonField{}, false
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}
