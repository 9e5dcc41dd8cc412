package longhaultype

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// An event's typed payload, in memory only: the writer that has just
// encoded a payload into Data may keep the value beside it (WithPayload),
// so that what reads the event in the same process (the engine's projection
// and its runner) does not decode the bytes it has just encoded. The value
// kept is exactly what decoding Data gives, or none is kept: it is never
// stored, never sent, and an event read back from a store or the API has
// none, so readers decode Data as before (DataAs).

// WithPayload returns e carrying v as its decoded payload, if v is a value
// (or a pointer to one) of the payload type of e.Type and Data is its JSON
// (the caller's word: the writer passes the value it has just encoded, and
// no other). What is kept is a copy of v made equal to what decoding Data
// gives: times without their monotonic reading and in the location decoding
// gives them, RawMessages compacted and escaped as encoding/json writes
// them, empty slices omitted as nil, invalid UTF-8 replaced. A type whose
// decoding the copy cannot reproduce (maps, interfaces, custom JSON
// methods, ...) keeps nothing, and its readers decode Data.
func (e Event) WithPayload(v any) Event {
	e.payload = nil
	if v == nil {
		return e
	}
	want, ok := payloadTypes[e.Type]
	if !ok || !payloadCopyable[e.Type] {
		return e
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && rv.Type().Elem() == want {
		if rv.IsNil() {
			return e
		}
		rv = rv.Elem()
	}
	if rv.Type() != want {
		return e
	}
	out := reflect.New(want).Elem()
	if !copyAsDecoded(out, rv, fieldOpts{}) {
		return e
	}
	e.payload = out.Interface()
	return e
}

// Payload returns the payload e carries (WithPayload), or nil.
func (e Event) Payload() any { return e.payload }

// DataAs returns e's payload as a T: the value the event carries when it is
// a T, or else Data decoded into a T. Readers share a carried value: they
// read it or copy from it, and never change its slices in place.
func DataAs[T any](e Event) (T, error) {
	if v, ok := e.payload.(T); ok {
		return v, nil
	}
	var v T
	err := json.Unmarshal(e.Data, &v)
	return v, err
}

// payloadTypes is each event type's payload type (eventPayloads).
var payloadTypes = func() map[string]reflect.Type {
	m := make(map[string]reflect.Type, len(eventPayloads))
	for _, p := range eventPayloads {
		m[p.typ] = reflect.TypeOf(p.data()).Elem()
	}
	return m
}()

// payloadCopyable says, per event type, whether its payload type is one
// copyAsDecoded reproduces decoding for; judged once, before any use.
var payloadCopyable = func() map[string]bool {
	m := make(map[string]bool, len(payloadTypes))
	for typ, t := range payloadTypes {
		m[typ] = copyable(t)
	}
	return m
}()

// PayloadCopyable reports whether WithPayload keeps a payload of eventType
// (its type is one the copy reproduces decoding for); the tests enumerate
// the registry with it.
func PayloadCopyable(eventType string) bool { return payloadCopyable[eventType] }

var (
	timeType         = reflect.TypeFor[time.Time]()
	rawMessageType   = reflect.TypeFor[json.RawMessage]()
	jsonMarshaler    = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler  = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler    = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler  = reflect.TypeFor[encoding.TextUnmarshaler]()
	isZeroerType     = reflect.TypeFor[interface{ IsZero() bool }]()
	copyableTypes    sync.Map // reflect.Type -> bool
	structFieldsMemo sync.Map // reflect.Type -> []fieldPlan
)

type fieldOpts struct{ omitEmpty, omitZero bool }

type fieldPlan struct {
	index int
	opts  fieldOpts
}

// copyable reports whether copyAsDecoded reproduces decoding for every
// value of t: only kinds whose encoding/json round trip it knows.
func copyable(t reflect.Type) bool {
	if v, ok := copyableTypes.Load(t); ok {
		return v.(bool)
	}
	copyableTypes.Store(t, false) // a recursive type is not copied
	ok := judge(t)
	copyableTypes.Store(t, ok)
	return ok
}

func judge(t reflect.Type) bool {
	if t == timeType || t == rawMessageType {
		return true
	}
	if t.Kind() == reflect.Pointer {
		// Its methods are its element's (a pointer type has none of
		// its own).
		return copyable(t.Elem())
	}
	for _, m := range []reflect.Type{jsonMarshaler, jsonUnmarshaler, textMarshaler, textUnmarshaler} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return false
		}
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64, reflect.String:
		return true
	case reflect.Slice:
		return t.Elem().Kind() != reflect.Uint8 && copyable(t.Elem())
	case reflect.Struct:
		fields, ok := planStruct(t)
		if !ok {
			return false
		}
		for _, f := range fields {
			ft := t.Field(f.index).Type
			if f.opts.omitZero && ft != timeType && (ft.Implements(isZeroerType) || reflect.PointerTo(ft).Implements(isZeroerType)) {
				return false
			}
			if !copyable(ft) {
				return false
			}
		}
		structFieldsMemo.Store(t, fields)
		return true
	}
	// Maps, interfaces, arrays, bytes, channels, functions: decoding
	// them is not a copy.
	return false
}

// planStruct lists t's fields as encoding/json sees them, or false for a
// struct whose fields it resolves by rules the copy does not follow
// (embedded or unexported fields, "-", ",string", names alike but for
// case).
func planStruct(t reflect.Type) ([]fieldPlan, bool) {
	var out []fieldPlan
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous || !f.IsExported() {
			return nil, false
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			return nil, false
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		key := strings.ToLower(name)
		if names[key] {
			return nil, false
		}
		names[key] = true
		var fo fieldOpts
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "omitempty":
				fo.omitEmpty = true
			case "omitzero":
				fo.omitZero = true
			case "":
			default:
				return nil, false // ",string" and options to come
			}
		}
		out = append(out, fieldPlan{index: i, opts: fo})
	}
	return out, true
}

// copyAsDecoded sets dst (a zero value of src's type) to what decoding
// src's encoding gives, src being a field with opts (or a top-level value
// or element: no options). It reports false when it cannot.
func copyAsDecoded(dst, src reflect.Value, opts fieldOpts) bool {
	t := src.Type()
	if opts.omitZero && (t == timeType && src.Interface().(time.Time).IsZero() || t != timeType && src.IsZero()) {
		return true // omitted: decoding leaves the zero value
	}
	switch t {
	case timeType:
		tm := src.Interface().(time.Time)
		if tm.Location() == time.UTC {
			dst.Set(reflect.ValueOf(tm.Round(0)))
			return true
		}
		// Another zone: decoding gives the offset's zone as time.Parse
		// finds it (Local, UTC or a fixed zone); let it say.
		b, err := tm.MarshalJSON()
		if err != nil {
			return false
		}
		var back time.Time
		if back.UnmarshalJSON(b) != nil {
			return false
		}
		dst.Set(reflect.ValueOf(back))
		return true
	case rawMessageType:
		m := src.Bytes()
		if len(m) == 0 {
			if opts.omitEmpty {
				return true
			}
			if src.IsNil() {
				dst.SetBytes([]byte("null"))
				return true
			}
			return false // encoding fails: never here
		}
		if !compactASCII(m) {
			enc, err := json.Marshal(json.RawMessage(m))
			if err != nil {
				return false
			}
			dst.SetBytes(enc)
			return true
		}
		dst.SetBytes(bytes.Clone(m))
		return true
	}
	switch t.Kind() {
	case reflect.String:
		s := src.String()
		if !utf8.ValidString(s) {
			s = replaceInvalid(s)
		}
		dst.SetString(s)
	case reflect.Float32, reflect.Float64:
		if opts.omitEmpty && src.Float() == 0 {
			return true // -0 is omitted too, and reads back as 0
		}
		dst.Set(src)
	case reflect.Pointer:
		if src.IsNil() {
			return true
		}
		p := reflect.New(t.Elem())
		if !copyAsDecoded(p.Elem(), src.Elem(), fieldOpts{}) {
			return false
		}
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() || src.Len() == 0 && opts.omitEmpty {
			return true
		}
		n := src.Len()
		s := reflect.MakeSlice(t, n, n)
		for i := range n {
			if !copyAsDecoded(s.Index(i), src.Index(i), fieldOpts{}) {
				return false
			}
		}
		dst.Set(s)
	case reflect.Struct:
		v, ok := structFieldsMemo.Load(t)
		if !ok {
			return false
		}
		for _, f := range v.([]fieldPlan) {
			if !copyAsDecoded(dst.Field(f.index), src.Field(f.index), f.opts) {
				return false
			}
		}
	default:
		dst.Set(src) // bools, integers
	}
	return true
}

// compactASCII reports whether m (valid JSON) is already as encoding/json
// writes a RawMessage: no space outside strings, and nothing it escapes
// (<, >, &) nor any byte outside printable ASCII, which it leaves to the
// encoder.
func compactASCII(m []byte) bool {
	for _, c := range m {
		switch {
		case c <= ' ', c >= 0x7f, c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// replaceInvalid replaces each byte of s that is not part of valid UTF-8
// with U+FFFD, as encoding/json writes it.
func replaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
