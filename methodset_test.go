package longhaul_test

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul"
	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/app"
)

// The three faces of the API: the application service both transports
// adapt, the Go client (over HTTP) and the library (in-process).
const (
	onService = 1 << iota
	onClient
	onRuntime
	onAll = onService | onClient | onRuntime
)

// methodSetExceptions are the methods that are not on all three, or not
// with one signature; every other exported method of the client and the
// Runtime is a Service method, with its signature. Each names the faces
// that have it (exactly) and why.
var methodSetExceptions = map[string]struct {
	on  int
	why string
}{
	// Transport and lifecycle only.
	"Health":  {onClient, "GET /healthz: whether the server process answers; an open Runtime is alive"},
	"Close":   {onRuntime, "stops the in-process runtime"},
	"Handler": {onRuntime, "the HTTP API of the in-process runtime, to serve"},
	"NodeID":  {onRuntime, "names the in-process runtime as the owner of the sessions it runs"},

	// Conveniences over a Service method (same signature on the client
	// and the Runtime).
	"GetFile":              {onClient | onRuntime, "OpenFile's content, read fully"},
	"PutFile":              {onClient | onRuntime, "PutFileIfMatch without a condition"},
	"DeleteFile":           {onClient | onRuntime, "DeleteFileIfMatch without a condition"},
	"AllActions":           {onClient | onRuntime, "follows ListAllActions' pages"},
	"AllWebhookDeliveries": {onClient | onRuntime, "follows ListWebhookDeliveries' pages"},
	"Subscribe":            {onRuntime, "StreamEvents, by the name the library first gave it"},
	"OpenFile":             {onService, "a transport streams the file; the client and the library return its bytes (GetFile)"},

	// Known shape differences (the client and the Runtime agree).
	"ArtifactContent": {onAll, "the Service returns the *lt.Artifact (a transport needs its digest); the client and the library return (data, contentType)"},
}

// TestMethodSets holds the Go client, the library and the application
// service to one method set: a method added to one and not the others, or
// given another signature, fails here until it is added everywhere or
// listed, with its reason, in methodSetExceptions.
func TestMethodSets(t *testing.T) {
	t.Parallel()
	faces := map[int]map[string]reflect.Type{
		onService: methods(reflect.TypeFor[app.Service]()),
		onClient:  methods(reflect.TypeFor[*client.Client]()),
		onRuntime: methods(reflect.TypeFor[*longhaul.Runtime]()),
	}
	require.Contains(t, faces[onService], "CreateSession", "sanity: the service's methods are listed")
	require.Contains(t, faces[onRuntime], "CreateSession", "sanity: the Runtime's methods are listed")
	names := map[string]bool{}
	for _, ms := range faces {
		for name := range ms {
			names[name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		on := 0
		for face, ms := range faces {
			if _, ok := ms[name]; ok {
				on |= face
			}
		}
		exc, excepted := methodSetExceptions[name]
		if !excepted {
			require.Equal(t, onAll, on, "%s is on %s only: add it to the others, or list it in methodSetExceptions with why", name, faceNames(on))
			require.Equal(t, faces[onService][name], faces[onClient][name], "%s: the client's signature differs from the service's", name)
			require.Equal(t, faces[onService][name], faces[onRuntime][name], "%s: the Runtime's signature differs from the service's", name)
			continue
		}
		require.Equal(t, exc.on, on, "%s is listed as an exception on %s but is on %s", name, faceNames(exc.on), faceNames(on))
		if on&onClient != 0 && on&onRuntime != 0 {
			require.Equal(t, faces[onClient][name], faces[onRuntime][name], "%s: the client's and the Runtime's signatures differ", name)
		}
	}
	for name := range methodSetExceptions {
		require.True(t, names[name], "methodSetExceptions lists %s, which no face has any more", name)
	}
}

// methods returns the exported methods of t by name, each as its function
// type without the receiver, so an interface's and a type's compare.
func methods(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for m := range t.Methods() {
		ft := m.Type
		if t.Kind() != reflect.Interface {
			in := make([]reflect.Type, 0, ft.NumIn()-1)
			for i := 1; i < ft.NumIn(); i++ {
				in = append(in, ft.In(i))
			}
			outs := make([]reflect.Type, 0, ft.NumOut())
			for i := range ft.NumOut() {
				outs = append(outs, ft.Out(i))
			}
			ft = reflect.FuncOf(in, outs, ft.IsVariadic())
		}
		out[m.Name] = ft
	}
	return out
}

func faceNames(on int) []string {
	var out []string
	for _, f := range []struct {
		bit  int
		name string
	}{{onService, "app.Service"}, {onClient, "client.Client"}, {onRuntime, "longhaul.Runtime"}} {
		if on&f.bit != 0 {
			out = append(out, f.name)
		}
	}
	return out
}
