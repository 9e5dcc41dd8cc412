package jsonstrict_test

import (
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/jsonstrict"
)

// nested is about a megabyte of valid JSON (json.Valid allows 10,000
// levels): depth objects, each with one key of keyLen bytes, under
// "meta", ending in a key given twice when dup is set.
func nested(depth, keyLen int, dup bool) []byte {
	var b strings.Builder
	b.WriteString(`{"meta":`)
	k := `{"` + strings.Repeat("k", keyLen) + `":`
	for range depth {
		b.WriteString(k)
	}
	if dup {
		b.WriteString(`{"a":1,"a":2}`)
	} else {
		b.WriteString("1")
	}
	b.WriteString(strings.Repeat("}", depth) + "}")
	return []byte(b.String())
}

// allocated is what fn allocates, in bytes. Tests using it do not run in
// parallel, so the count is fn's.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDeepDocumentsCostLinearMemory: a document nested as deep as
// json.Valid allows is checked in memory proportional to its size. A
// path built whole at every level cost the sum of every level's path,
// quadratic in the depth: a megabyte a model writes in a spawn's
// arguments (or a client in a request body) allocated about 4.6 GB and
// took a node's memory down. The path a refusal names is kept short.
func TestDeepDocumentsCostLinearMemory(t *testing.T) {
	for _, dup := range []bool{false, true} {
		data := nested(9990, 95, dup)
		require.True(t, json.Valid(data))
		var err error
		alloc := allocated(func() { err = jsonstrict.CheckExact(data, docType) })
		require.Less(t, alloc, uint64(32*len(data)), "%d bytes allocated to check %d", alloc, len(data))
		if !dup {
			require.NoError(t, err)
			continue
		}
		var se *jsonstrict.Error
		require.ErrorAs(t, err, &se)
		require.LessOrEqual(t, len(se.Path), 256+len("…"))
		require.True(t, strings.HasPrefix(se.Path, "meta.kkk"), se.Path)
		require.True(t, strings.HasSuffix(se.Path, "kkk.a"), se.Path)
		require.Contains(t, se.Path, "…")
	}
	// A wrong-typed or unknown field deep down is named as cheaply.
	data := nested(9990, 95, false)
	var path string
	alloc := allocated(func() { path, _ = jsonstrict.ValuePathAt(data, int64(len(data)-9992)) })
	require.Less(t, alloc, uint64(32*len(data)))
	require.Contains(t, path, "…")
	alloc = allocated(func() { path = jsonstrict.UnknownFieldPath(data, reflect.TypeFor[*struct{ X int }](), "meta") })
	require.Less(t, alloc, uint64(32*len(data)))
	require.Equal(t, "meta", path)
}
