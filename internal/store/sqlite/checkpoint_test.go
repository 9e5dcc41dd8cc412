package sqlite

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBackgroundCheckpoint: once the commits have written checkpointPages
// pages to the WAL, the checkpointer copies them into the database file
// from its own connection (the writer's own automatic checkpoint is off
// here, so no commit copies anything), and every append reads back.
func TestBackgroundCheckpoint(t *testing.T) {
	s := openMigrated(t, nil)
	raw(t, s, func(w *writer) error {
		w.checkpointPages = 8
		_, err := w.conn.ExecContext(context.Background(), "PRAGMA wal_autocheckpoint = 0")
		return err
	})
	before := fileSize(t, s.Path())
	require.Zero(t, s.w.ckpt.runs.Load(), "no checkpoint before the threshold")

	createSession(t, s, "ses_a", false)
	last := int64(1)
	for range 20 {
		_, err := s.EventAppend(t.Context(), appendParams("ses_a", last, 2))
		require.NoError(t, err)
		last += 2
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.w.ckpt.runs.Load() == 0 || s.w.ckpt.copied.Load() == 0 {
		if time.Now().After(deadline) {
			require.FailNow(t, "no background checkpoint", "runs %d, copied %d", s.w.ckpt.runs.Load(), s.w.ckpt.copied.Load())
		}
		time.Sleep(time.Millisecond)
	}
	require.Greater(t, fileSize(t, s.Path()), before, "the WAL's pages are in the database file")

	events, err := s.EventList(t.Context(), "ses_a", 0, 0)
	require.NoError(t, err)
	require.Len(t, events, int(last))
}

// TestCheckpointerSignalNeverWaits: a wake while one is pending is dropped,
// so the writer never waits for the checkpointer.
func TestCheckpointerSignalNeverWaits(t *testing.T) {
	c := &checkpointer{wake: make(chan struct{}, 1)}
	for range 3 {
		c.signal()
	}
	require.Len(t, c.wake, 1)
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}
