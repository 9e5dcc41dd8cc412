package environment_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// TestMain lets the test binary stand in for the longhaul binary inside a
// bwrap sandbox (the egress forwarder; a root run's EnterCommand is
// handled by the sandbox package's init).
func TestMain(m *testing.M) { environmenttest.Main(m) }

// localBackend returns a NewBackend over sb: each backend is a machine of
// its own (its own workspace root and socket directory).
func localBackend(sb sandbox.Backend) environmenttest.NewBackend {
	return func(tb testing.TB, blobs *environmenttest.Blobs) environment.Backend {
		tb.Helper()
		spaces, err := workspace.New(tb.TempDir())
		require.NoError(tb, err)
		b, err := environment.NewLocal(&environment.LocalConfig{Sandbox: sb, Workspaces: spaces, Blobs: blobs, SocketDir: tb.TempDir()})
		require.NoError(tb, err)
		return b
	}
}

func TestLocalPlainConformance(t *testing.T) {
	environmenttest.Run(t, localBackend(sandbox.NewLocal()))
}

func TestLocalBwrapConformance(t *testing.T) {
	environmenttest.Run(t, localBackend(environmenttest.Bwrap(t)))
}

// The cost of a shell call through the seam, per backend: the baseline a
// remote runner's figure is compared with (issue 20's benchmark).
func BenchmarkLocalPlainRun(b *testing.B) {
	environmenttest.BenchmarkRun(b, localBackend(sandbox.NewLocal()))
}

func BenchmarkLocalBwrapRun(b *testing.B) {
	environmenttest.BenchmarkRun(b, localBackend(environmenttest.Bwrap(b)))
}

func TestNewLocalNamesTheMissingField(t *testing.T) {
	spaces, err := workspace.New(t.TempDir())
	require.NoError(t, err)
	blobs := environmenttest.NewBlobs(t)
	for _, tc := range []struct {
		cfg  *environment.LocalConfig
		want string
	}{
		{nil, "config is nil"},
		{&environment.LocalConfig{Workspaces: spaces, Blobs: blobs}, "config.sandbox"},
		{&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Blobs: blobs}, "config.workspaces"},
		{&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: spaces}, "config.blobs"},
	} {
		_, err := environment.NewLocal(tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
}

func BenchmarkLocalPlainReadFile(b *testing.B) {
	environmenttest.BenchmarkReadFile(b, localBackend(sandbox.NewLocal()))
}

// localAt is a local backend (the plain sandbox) over the workspace root
// root, with its Manager: a node, or the same node again after a restart
// (a new backend on the same root and blobs).
func localAt(tb testing.TB, root string, blobs *environmenttest.Blobs) (environment.Backend, *workspace.Manager) {
	tb.Helper()
	spaces, err := workspace.New(root)
	require.NoError(tb, err)
	b, err := environment.NewLocal(&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: spaces, Blobs: blobs, SocketDir: tb.TempDir()})
	require.NoError(tb, err)
	return b, spaces
}
