package engine

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProxySocketPathFits: however deep the data directory, a proxy's
// socket path fits in sun_path, and each session gets its own.
func TestProxySocketPathFits(t *testing.T) {
	t.Parallel()
	const id = "ses_01JBZ8Y7Q4M5N6P7R8S9T0V1W2"
	shallow := t.TempDir()
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	for _, dir := range []string{shallow, filepath.Join(shallow, strings.Repeat("x", 100-len(shallow)-len("/.sock")-16)), deep} {
		p := &proxySockets{dir: dir}
		a, err := p.path(id)
		require.NoError(t, err)
		require.LessOrEqual(t, len(a), maxSocketPath, a)
		b, err := p.path(id + "X")
		require.NoError(t, err)
		require.NotEqual(t, a, b)
		again, err := p.path(id)
		require.NoError(t, err)
		require.Equal(t, a, again, "a session's socket path is stable")
		p.close()
	}
	p := &proxySockets{dir: shallow}
	got, err := p.path(id)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(shallow, id+".proxy.sock"), got, "a path that fits keeps its readable name")
}
