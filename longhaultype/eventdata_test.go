package longhaultype_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// eventConstants reads the package's source for its Event* string
// constants: name -> value. Constants, not a hand-kept list, are what the
// writers use, so a type added without a registry entry shows here.
func eventConstants(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Event") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					out[n.Name] = v
				}
			}
		}
	}
	return out
}

// TestEveryEventTypeHasItsPayloadType: the registry lists each Event*
// constant once, and nothing else, and its payload type is named after the
// constant (EventX: XData; workspace.changed, shared with the file API,
// carries WorkspaceChange).
func TestEveryEventTypeHasItsPayloadType(t *testing.T) {
	t.Parallel()
	consts := eventConstants(t)
	require.Len(t, consts, 55, "sanity: the parse found the event constants")
	types := lt.EventTypes()
	require.Len(t, types, len(consts), "one registry entry per Event* constant")
	seen := map[string]bool{}
	for _, typ := range types {
		require.False(t, seen[typ], "%s is registered twice", typ)
		seen[typ] = true
	}
	for name, typ := range consts {
		require.True(t, seen[typ], "%s (%s) has no payload type in the registry", name, typ)
		v, ok := lt.NewEventData(typ)
		require.True(t, ok, typ)
		rt := reflect.TypeOf(v)
		require.Equal(t, reflect.Pointer, rt.Kind(), "%s: NewEventData returns a pointer", typ)
		require.Equal(t, reflect.Struct, rt.Elem().Kind(), typ)
		want := strings.TrimPrefix(name, "Event") + "Data"
		if typ == lt.EventWorkspaceChanged {
			want = "WorkspaceChange"
		}
		require.Equal(t, want, rt.Elem().Name(), "the payload type of %s", typ)
		again, _ := lt.NewEventData(typ)
		require.NotSame(t, v, again, "%s: each call returns a fresh value", typ)
	}
	_, ok := lt.NewEventData("no.such_type")
	require.False(t, ok)
}

// TestEventDataRoundTrips fills every field of every payload type (nested
// ones included) and requires the JSON to bring it back unchanged: a field
// without a tag that survives, two fields with one JSON name, or a type
// that cannot be decoded fails here.
func TestEventDataRoundTrips(t *testing.T) {
	t.Parallel()
	for _, typ := range lt.EventTypes() {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			v, ok := lt.NewEventData(typ)
			require.True(t, ok)
			fill(t, reflect.ValueOf(v).Elem(), typ)
			require.False(t, reflect.ValueOf(v).Elem().IsZero())
			raw, err := json.Marshal(v)
			require.NoError(t, err)
			back, _ := lt.NewEventData(typ)
			require.NoError(t, json.Unmarshal(raw, back))
			require.Equal(t, v, back, "%s: %s", typ, raw)

			// The same through an Event, as a client reads it.
			got, err := lt.Event{Seq: 7, Type: typ, Data: raw}.DecodeData()
			require.NoError(t, err)
			require.Equal(t, v, got)
		})
	}
}

// fill sets every exported field of v, recursively, to a value that is not
// its zero and that JSON keeps (distinct per path, so that two fields
// swapped by their tags differ).
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	seed := len(path)
	switch {
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte(fmt.Sprintf(`{"at":%q}`, path)))
		return
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, seed%60, 0, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(seed))
	case reflect.Float64:
		v.SetFloat(float64(seed) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), path+"[0]")
	case reflect.Map:
		require.Equal(t, reflect.String, v.Type().Key().Kind(), "%s: a map keyed by strings", path)
		v.Set(reflect.MakeMap(v.Type()))
		e := reflect.New(v.Type().Elem()).Elem()
		fill(t, e, path+"[k]")
		v.SetMapIndex(reflect.ValueOf("k").Convert(v.Type().Key()), e)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.IsExported() {
				fill(t, v.Field(i), path+"."+f.Name)
			}
		}
	default:
		t.Fatalf("%s: fill does not know %s; teach it", path, v.Type())
	}
}
