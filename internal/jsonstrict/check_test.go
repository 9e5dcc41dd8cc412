package jsonstrict_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/jsonstrict"
)

// doc is a request-like type: struct fields (one promoted from an embedded
// struct, one skipped), a slice of structs, a map and a type that decodes
// itself.
type doc struct {
	Input string            `json:"input"`
	Items []item            `json:"items"`
	Meta  map[string]any    `json:"meta"`
	Raw   json.RawMessage   `json:"raw"`
	Tags  map[string]string `json:"tags"`
	Skip  string            `json:"-"`
	Extra
}

type item struct {
	Name   string `json:"name"`
	Effect string `json:"effect,omitempty"`
}

// Extra is embedded in doc without a tag, so its fields are doc's.
type Extra struct {
	Note string `json:"note"`
}

var docType = reflect.TypeFor[*doc]()

// requireRefused asserts err is an *Error at path whose message holds
// each of parts.
func requireRefused(t *testing.T, err error, path string, parts ...string) {
	t.Helper()
	var se *jsonstrict.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, path, se.Path, "path of %v", err)
	for _, p := range parts {
		require.Contains(t, se.Message, p)
	}
	require.Equal(t, se.Message, err.Error())
}

func TestCheckUnambiguousRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, data, path, message string
	}{
		{"a key given twice", `{"input":"a","input":"b"}`, "input",
			`duplicate key "input": each key may be given once in an object`},
		{"an escaped spelling of the same key", `{"input":"a","\u0069nput":"b"}`, "input",
			`duplicate key "input": each key may be given once in an object`},
		{"another case of a field's name", `{"input":"a","INPUT":"b"}`, "INPUT",
			`duplicate key "INPUT": "input" names the same field, given earlier in the object`},
		{"a letter encoding/json folds to ASCII", `{"items":[],"item\u017f":[]}`, "itemſ",
			`duplicate key "itemſ": "items" names the same field, given earlier in the object`},
		{"another case in an array element", `{"items":[{"name":"a"},{"name":"b","Name":"c"}]}`, "items[1].Name",
			`duplicate key "items[1].Name": "name" names the same field, given earlier in the object`},
		{"another case of a promoted field", `{"note":"a","Note":"b"}`, "Note",
			`duplicate key "Note": "note" names the same field, given earlier in the object`},
		{"a map's key given twice", `{"tags":{"a":"1","a":"2"}}`, "tags.a",
			`duplicate key "tags.a": each key may be given once in an object`},
		{"in free-form JSON", `{"meta":{"n":[{"c":1,"c":2}]}}`, "meta.n[0].c",
			`duplicate key "meta.n[0].c": each key may be given once in an object`},
		{"in a value that decodes itself", `{"raw":{"a":1,"a":2}}`, "raw.a",
			`duplicate key "raw.a": each key may be given once in an object`},
		{"a lone high surrogate", `{"input":"a\ud800b"}`, "input",
			`field "input" holds an escaped lone surrogate at byte offset 11: it is not valid UTF-16, and would not survive as text`},
		{"a lone low surrogate deep down", `{"items":[{"name":"\udc00"}]}`, "items[0].name",
			`field "items[0].name" holds an escaped lone surrogate at byte offset 19`},
		{"a lone surrogate in a key", `{"a\udc00":1}`, "",
			`an escaped lone surrogate at byte offset 3: it is not valid UTF-16, and would not survive as text`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireRefused(t, jsonstrict.CheckUnambiguous([]byte(tc.data), docType), tc.path, tc.message)
		})
	}
}

func TestCheckUnambiguousAccepts(t *testing.T) {
	t.Parallel()
	for _, data := range []string{
		// Keys that differ in case are distinct where nothing folds them:
		// a map, free-form JSON, a value that decodes itself, keys no field
		// takes (DisallowUnknownFields names those).
		`{"tags":{"a":"1","A":"2"},"meta":{"a":1,"A":2},"raw":{"a":1,"A":2},"zz":1,"ZZ":2}`,
		// The same key in sibling objects, and in array elements.
		`{"items":[{"name":"a"},{"name":"b"}],"meta":{"x":{"a":1},"y":{"a":1}}}`,
		// A surrogate pair, and an escaped backslash before a "u".
		`{"input":"\ud83d\ude80 \\ud800"}`,
		`{}`,
	} {
		require.NoError(t, jsonstrict.CheckUnambiguous([]byte(data), docType), data)
	}
	// Free-form at the root (a nil type): keys are compared exactly.
	require.NoError(t, jsonstrict.CheckUnambiguous([]byte(`{"input":1,"Input":2}`), nil))
	requireRefused(t, jsonstrict.CheckUnambiguous([]byte(`[{"k":1,"k":2}]`), nil), "[0].k")
}

func TestCheckUnambiguousOnInvalidJSON(t *testing.T) {
	t.Parallel()
	err := jsonstrict.CheckUnambiguous([]byte(`{"input":`), docType)
	require.Error(t, err)
	var se *jsonstrict.Error
	require.False(t, errors.As(err, &se), "not a refusal of the document but the decoder's error: %v", err)
}

func TestCheckUTF8(t *testing.T) {
	t.Parallel()
	require.NoError(t, jsonstrict.CheckUTF8([]byte(`{"input":"héllo ✓ 🚀"}`), "the document"))
	requireRefused(t, jsonstrict.CheckUTF8([]byte("{\"input\":\"ab\xffcd\"}"), "the document"), "input",
		"field \"input\" holds invalid UTF-8 at byte offset 12: the document must be UTF-8")
	requireRefused(t, jsonstrict.CheckUTF8([]byte("{\"items\":[{\"name\":\"\xed\xa0\x80\"}]}"), "the document"), "items[0].name",
		"invalid UTF-8 at byte offset 19")
	requireRefused(t, jsonstrict.CheckUTF8([]byte("{\"inp\xffut\":\"x\"}"), "the arguments"), "",
		"invalid UTF-8 at byte offset 5: the arguments must be UTF-8")
}

func TestValuePathAt(t *testing.T) {
	t.Parallel()
	data := []byte(`{"a":[1,{"b":"x"}],"c":{"d":true}}`)
	for _, tc := range []struct {
		after string // the offset is just past the first occurrence of after
		path  string
	}{
		{`{`, ""},
		{`[`, "a"},
		{`1`, "a[0]"},
		{`"x"`, "a[1].b"},
		{`tru`, "c.d"},
	} {
		off := strings.Index(string(data), tc.after) + len(tc.after)
		path, ok := jsonstrict.ValuePathAt(data, int64(off))
		require.True(t, ok, tc.after)
		require.Equal(t, tc.path, path, tc.after)
	}
	_, ok := jsonstrict.ValuePathAt(data, int64(len(data)+10))
	require.False(t, ok, "past the end")
}

func TestUnknownFieldPath(t *testing.T) {
	t.Parallel()
	data := []byte(`{"input":"x","items":[{"name":"a"},{"NAME":"b","efect":"read"}]}`)
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var d doc
	err := dec.Decode(&d)
	name, ok := jsonstrict.UnknownFieldName(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, "efect", name)
	require.Equal(t, "items[1].efect", jsonstrict.UnknownFieldPath(data, docType, name),
		"NAME is name's field, in another case; efect is nobody's")
	require.Equal(t, "other", jsonstrict.UnknownFieldPath(data, docType, "other"),
		"a key the walk does not find is named alone")

	_, ok = jsonstrict.UnknownFieldName(errors.New("json: cannot unmarshal string into Go value of type int"))
	require.False(t, ok)
	_, ok = jsonstrict.UnknownFieldName(nil)
	require.False(t, ok)
}

func FuzzCheckUnambiguous(f *testing.F) {
	f.Add([]byte(`{"input":"a","INPUT":"b"}`))
	f.Add([]byte(`{"items":[{"name":"a","Name":"b"}],"meta":{"a":1,"a":2}}`))
	f.Add([]byte(`{"input":"\ud800","raw":{"x":[1,2,{"y":null}]}}`))
	f.Add([]byte("{\"input\":\"\xff\"}"))
	f.Add([]byte(`[{"k":1},{"k":"\\u0041"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// CheckUTF8 refuses exactly what is not UTF-8.
		err := jsonstrict.CheckUTF8(data, "the document")
		require.Equal(t, utf8.Valid(data), err == nil, "%v", err)
		if !json.Valid(data) {
			return
		}
		// On valid JSON a check refuses with an *Error or not at all,
		// and a refusal with a path names it in its message.
		for _, typ := range []reflect.Type{nil, docType} {
			err := jsonstrict.CheckUnambiguous(data, typ)
			if err == nil {
				continue
			}
			var se *jsonstrict.Error
			require.ErrorAs(t, err, &se)
			if se.Path != "" {
				require.Contains(t, se.Message, strconv.Quote(se.Path))
			}
		}
	})
}
