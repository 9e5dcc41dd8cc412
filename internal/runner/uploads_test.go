package runner

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
)

// TestIdleUploadsExpire: writes in parts the server gave up on (a
// cancelled write sends no more parts) are discarded once idle, so that
// they cannot fill the connection's uploads and refuse every later large
// write as busy.
func TestIdleUploadsExpire(t *testing.T) {
	dir := t.TempDir()
	c := newConnEnvs(&Runner{uploads: dir})
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c.now = func() time.Time { return now }
	first := func(n int) error {
		_, err := c.upload(&link.FSWriteParams{EnvID: "e1", Path: "big.bin", Upload: fmt.Sprintf("u%d", n), Data: []byte("part")})
		return err
	}
	for n := range maxFileUploads {
		require.NoError(t, first(n))
	}
	var re *link.RemoteError
	require.True(t, errors.As(first(maxFileUploads), &re))
	require.Equal(t, link.CodeBusy, re.Code)

	now = now.Add(uploadIdle + time.Second)
	require.NoError(t, first(maxFileUploads))
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, left, 1, "the idle uploads' files are removed")
}
