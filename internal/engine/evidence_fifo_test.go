//go:build unix

package engine

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A FIFO the agent made where a script is expected does not hold the
// runner: reading it for an approval's evidence does not wait for a writer.
// (Found by review: an open for reading blocked for ever.)
func TestEvidenceDoesNotBlockOnAFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "run.sh"), 0o644))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	done := make(chan error, 1)
	go func() {
		_, _, err := readBounded(root, "run.sh")
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "run.sh is not a regular file")
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO for the evidence blocked")
	}
}
