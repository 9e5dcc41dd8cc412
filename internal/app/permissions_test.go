package app_test

import (
	"context"
	"iter"
	"net/http"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestPermissionsCoverTheService: the table names every Service method
// (but the open probe Ready) and nothing else, each with known roles;
// admin may call everything, runner nothing but Me (who it is).
func TestPermissionsCoverTheService(t *testing.T) {
	t.Parallel()
	svc := reflect.TypeFor[app.Service]()
	names := map[string]bool{}
	for m := range svc.Methods() {
		names[m.Name] = true
		if m.Name == "Ready" {
			require.NotContains(t, app.Permissions, "Ready", "the probe is open")
			continue
		}
		require.Contains(t, app.Permissions, m.Name, "Service.%s has no entry in app.Permissions: say who may call it", m.Name)
		require.True(t, app.Allowed(m.Name, lt.RoleAdmin), "%s: admin may do everything", m.Name)
		if m.Name == "Me" {
			for _, r := range lt.Roles() {
				require.Equal(t, r != lt.RoleRunner, app.Allowed(m.Name, r), "every role but a runner may ask who it is: %s", r)
			}
		}
		require.False(t, app.Allowed(m.Name, lt.RoleRunner), "%s: a runner calls nothing of the Service", m.Name)
	}
	for name, roles := range app.Permissions {
		require.True(t, names[name], "app.Permissions lists %s, which Service lacks", name)
		for _, r := range roles {
			require.Contains(t, lt.Roles(), r, "%s", name)
		}
	}
}

// TestEveryMethodChecksItsCaller calls every Service method of the App
// with empty arguments as no caller and as every role: a missing caller and
// a role the table does not allow are a 403 saying the role and what it
// lacks, before anything else is looked at; an allowed role gets past the
// check (whatever the zero arguments then earn).
func TestEveryMethodChecksItsCaller(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	v := reflect.ValueOf(f.app)
	for m := range reflect.TypeFor[app.Service]().Methods() {
		if m.Name == "Ready" {
			continue
		}
		call := func(ctx context.Context) error { return callZero(t, v.MethodByName(m.Name), ctx) }

		err := call(t.Context())
		e := apierror.From(err)
		require.Equal(t, http.StatusForbidden, e.Status, "%s without a caller: %v", m.Name, err)
		require.Contains(t, e.Message, "no caller identity")

		for _, role := range lt.Roles() {
			ctx := app.WithCaller(t.Context(), app.Caller{Name: "t", Role: role})
			err := call(ctx)
			if app.Allowed(m.Name, role) {
				if err != nil {
					require.NotEqual(t, http.StatusForbidden, apierror.From(err).Status, "%s as %s: %v", m.Name, role, err)
				}
				continue
			}
			e := apierror.From(err)
			require.Equal(t, http.StatusForbidden, e.Status, "%s as %s: %v", m.Name, role, err)
			require.Equal(t, lt.CodeForbidden, e.Code)
			require.Contains(t, e.Message, "the "+string(role)+" role may not call "+m.Name)
		}
	}
}

// callZero calls method with ctx and zero values for its other arguments
// (empty requests for pointers) and returns its error: the last result, or a stream's first value's.
func callZero(t *testing.T, method reflect.Value, ctx context.Context) error {
	t.Helper()
	mt := method.Type()
	args := []reflect.Value{reflect.ValueOf(ctx)}
	for i := 1; i < mt.NumIn(); i++ {
		if in := mt.In(i); in.Kind() == reflect.Pointer {
			// An empty request rather than nil: an allowed caller gets
			// past the check to the use case, which refuses it.
			args = append(args, reflect.New(in.Elem()))
		} else {
			args = append(args, reflect.Zero(in))
		}
	}
	return callArgs(t, method, args)
}

// callArgs calls method with args and returns its error: the last result,
// or a stream's first value's.
func callArgs(t *testing.T, method reflect.Value, args []reflect.Value) error {
	t.Helper()
	mt := method.Type()
	out := method.Call(args)
	last := out[len(out)-1]
	if last.Type().Kind() == reflect.Func { // a stream: iter.Seq2[T, error]
		var err error
		switch seq := last.Interface().(type) {
		case iter.Seq2[lt.Event, error]:
			for _, e := range seq {
				err = e
				break
			}
		case iter.Seq2[lt.TreeEvent, error]:
			for _, e := range seq {
				err = e
				break
			}
		default:
			t.Fatalf("%s: a stream of an unknown type", mt)
		}
		return err
	}
	for _, o := range out {
		if c, ok := o.Interface().(interface{ Close() error }); ok && c != nil && !o.IsNil() {
			_ = c.Close()
		}
	}
	if last.IsNil() {
		return nil
	}
	return last.Interface().(error)
}
