package jsonstrict

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
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
	if err := w.value(nil); errors.Is(err, errFound) {
		return w.found, true
	}
	return "", false
}

type offsetWalker struct {
	dec    *json.Decoder
	target int64
	found  string
}

func (w *offsetWalker) value(path *lazyPath) error {
	start := w.dec.InputOffset()
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	if end := w.dec.InputOffset(); start < w.target && w.target <= end {
		w.found = path.String()
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
			if err := w.value(path.key(k)); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
		return err
	case json.Delim('['):
		for i := 0; w.dec.More(); i++ {
			if err := w.value(path.index(i)); err != nil {
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
	if err := w.value(t, nil); errors.Is(err, errFound) && w.foundKey == name {
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

func (w *fieldWalker) value(t reflect.Type, path *lazyPath) error {
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
				w.found, w.foundKey = path.key(k).String(), k
				return errFound
			}
			if err := w.value(ft, path.key(k)); err != nil {
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
			if err := w.value(t.Elem(), path.key(k)); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
		return err
	case delim == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i := 0; w.dec.More(); i++ {
			if err := w.value(t.Elem(), path.index(i)); err != nil {
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

// lazyPath is a place in a document, built as a walk descends and joined
// into a string only when one is reported: a string per level would cost
// the sum of the lengths of every level's path, quadratic in the depth.
type lazyPath struct {
	parent *lazyPath
	name   string
	idx    int
	isIdx  bool
}

func (p *lazyPath) key(k string) *lazyPath { return &lazyPath{parent: p, name: k} }
func (p *lazyPath) index(i int) *lazyPath  { return &lazyPath{parent: p, idx: i, isIdx: true} }

// String is the path as errors name it ("a.b[2].c"), its middle elided
// past maxPath bytes: a path as long as the document (a key in an object
// nested ten thousand deep) would put the document again into every
// message that names it.
func (p *lazyPath) String() string {
	var segs []*lazyPath
	for q := p; q != nil; q = q.parent {
		segs = append(segs, q)
	}
	var b strings.Builder
	for i := len(segs) - 1; i >= 0; i-- {
		switch {
		case segs[i].isIdx:
			b.WriteString("[" + strconv.Itoa(segs[i].idx) + "]")
		case b.Len() > 0:
			b.WriteString("." + segs[i].name)
		default:
			b.WriteString(segs[i].name)
		}
	}
	return elide(b.String())
}

// maxPath bounds a path in an error message (elide).
const maxPath = 256

// elide keeps the first and last bytes of a path longer than maxPath,
// whole UTF-8 characters, with "…" between.
func elide(path string) string {
	if len(path) <= maxPath {
		return path
	}
	head, tail := path[:maxPath/2], path[len(path)-maxPath/2:]
	for len(head) > 0 && !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	for len(tail) > 0 && !utf8.ValidString(tail) {
		tail = tail[1:]
	}
	return head + "…" + tail
}
