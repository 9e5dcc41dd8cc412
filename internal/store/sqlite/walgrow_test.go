package sqlite

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	msqlite "modernc.org/sqlite"
)

// TestCommitsSyncWithFdatasync: an open store has switched the library to
// fdatasync where the platform has it.
func TestCommitsSyncWithFdatasync(t *testing.T) {
	openTest(t, nil)
	if runtime.GOOS != "linux" {
		t.Skip("fdatasync is switched on where modernc.org/sqlite has it: Linux")
	}
	require.True(t, msqlite.FdatasyncEnabled())
}

// TestWALGrownAheadOfTheCommits: the WAL file grows in a few steps of
// zeros ahead of the commits rather than at each, never past the limit,
// and everything appended reads back.
func TestWALGrownAheadOfTheCommits(t *testing.T) {
	s := openMigrated(t, nil)
	growingWAL(t, s)
	createSession(t, s, "ses_a", false)
	last := int64(1)
	sizes := map[int64]bool{}
	commits := 0
	for {
		_, err := s.EventAppend(t.Context(), appendParams("ses_a", last, 2))
		require.NoError(t, err)
		last += 2
		commits++
		// The writer grows the WAL after it answered: look from its
		// goroutine, once it is done.
		var next, limit, size int64
		raw(t, s, func(w *writer) error {
			next, limit, size = w.wal.next, w.wal.limit, fileSize(t, s.Path()+"-wal")
			return nil
		})
		sizes[size] = true
		// Every commit's frames lie within the file, and at least
		// walGrowAhead frames of zeros (or the limit) follow them.
		require.GreaterOrEqual(t, size, min(limit, next+walGrowAhead*s.w.wal.frameSize), "after commit %d", commits)
		require.LessOrEqual(t, size, limit)
		if next > 2*walGrowStep*s.w.wal.frameSize {
			break
		}
	}
	require.Greater(t, commits, 10*len(sizes), "the file's size changed at %d of %d commits", len(sizes), commits)

	events, err := s.EventList(t.Context(), "ses_a", 0, 10000)
	require.NoError(t, err)
	require.Equal(t, int(last), len(events))
}

// TestSerialWALStaysWithinItsZeros: commits one after another, past the
// writer's own checkpoint threshold twice over, find the WAL started again
// from its beginning before they reach the end of the zeros the grower
// wrote: the file stays within the grower's limit, but for a commit's
// frames (that checkpoint runs in the commit that crosses its threshold),
// so no commit but those pays for growing the file. It fails if the
// threshold and the grower's limit part: a limit below where the WAL
// starts again has every commit past it grow the file. The background
// checkpointer, which usually has the WAL started again sooner, is kept
// out: whether it has depends on its timing, and a checkpoint of its in
// progress can keep the writer's from copying everything (SQLite then
// tries again at the next commit).
func TestSerialWALStaysWithinItsZeros(t *testing.T) {
	s := openMigrated(t, nil)
	growingWAL(t, s)
	raw(t, s, func(w *writer) error {
		w.checkpointPages = math.MaxInt64
		return nil
	})
	createSession(t, s, "ses_a", false)
	walPath := s.Path() + "-wal"
	salt := func() uint32 {
		hdr := make([]byte, walHeaderSize)
		f, err := os.Open(walPath)
		require.NoError(t, err)
		defer f.Close()
		_, err = io.ReadFull(f, hdr)
		require.NoError(t, err)
		return binary.BigEndian.Uint32(hdr[16:20])
	}
	// Until the WAL has been started again twice (a new salt each time).
	salts := map[uint32]bool{salt(): true}
	last := int64(1)
	var limit, frame, largest int64
	for appends := 0; len(salts) < 3; appends++ {
		require.Less(t, appends, 20000, "the WAL was not started again from its beginning")
		_, err := s.EventAppend(t.Context(), appendParams("ses_a", last, 2))
		require.NoError(t, err)
		last += 2
		raw(t, s, func(w *writer) error {
			limit, frame = w.wal.limit, w.wal.frameSize
			largest = max(largest, fileSize(t, walPath))
			return nil
		})
		salts[salt()] = true
	}
	require.LessOrEqual(t, largest, limit+64*frame, "the WAL grew past the grower's zeros")
}

// TestWALGrownThenCrashed: a copy of the database and its WAL taken while
// the store is open, as a crash leaves them (the WAL's tail zeros, and
// frames of an older generation once a checkpoint let SQLite start the WAL
// again from its beginning), opens with every acknowledged append.
func TestWALGrownThenCrashed(t *testing.T) {
	s := openMigrated(t, nil)
	raw(t, s, func(w *writer) error {
		// No background checkpoint: the test runs its own, so that
		// nothing writes the files while they are copied.
		w.checkpointPages = 1 << 40
		return nil
	})
	growingWAL(t, s)
	createSession(t, s, "ses_a", false)
	last := int64(1)
	for i := range 300 {
		_, err := s.EventAppend(t.Context(), appendParams("ses_a", last, 2))
		require.NoError(t, err)
		last += 2
		if i%100 == 99 {
			raw(t, s, func(w *writer) error {
				var busy, frames, copied int64
				err := w.conn.QueryRowContext(t.Context(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
				require.Equal(t, frames, copied, "a whole checkpoint")
				return err
			})
		}
	}
	wal := s.Path() + "-wal"
	walBytes, err := os.ReadFile(wal)
	require.NoError(t, err)
	// The header's checkpoint sequence counts the times SQLite started
	// the WAL again from its beginning.
	require.GreaterOrEqual(t, binary.BigEndian.Uint32(walBytes[12:16]), uint32(2), "the WAL was written again from its beginning")
	require.Equal(t, make([]byte, walGrowAhead), walBytes[len(walBytes)-walGrowAhead:], "the WAL ends with zeros")

	dir := t.TempDir()
	copyFile(t, s.Path(), filepath.Join(dir, "copy.db"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "copy.db-wal"), walBytes, 0o600))

	c := openPath(t, filepath.Join(dir, "copy.db"), nil)
	events, err := c.EventList(t.Context(), "ses_a", 0, 10000)
	require.NoError(t, err)
	require.Equal(t, int(last), len(events))
	// And it goes on appending after the copy's last frame.
	_, err = c.EventAppend(t.Context(), appendParams("ses_a", last, 2))
	require.NoError(t, err)
	events, err = c.EventList(t.Context(), "ses_a", 0, 10000)
	require.NoError(t, err)
	require.Equal(t, int(last)+2, len(events))
}

// TestWALGrowerWritesOnlyPastTheEnd: what the file holds is kept, zeros
// follow it up to the target, and the file never grows past the limit.
func TestWALGrowerWritesOnlyPastTheEnd(t *testing.T) {
	db := filepath.Join(t.TempDir(), "x.db")
	head := bytes.Repeat([]byte{0xA5}, 1000)
	require.NoError(t, os.WriteFile(db+"-wal", head, 0o600))
	g := newWALGrower(db, 100, 2*walGrowStep, slog.New(slog.DiscardHandler))
	require.Equal(t, int64(124), g.frameSize)

	g.afterCommit(0) // the first commit: the file's end is the next frame
	require.Equal(t, int64(1000), g.next)
	got, err := os.ReadFile(db + "-wal")
	require.NoError(t, err)
	require.Equal(t, 1000+walGrowStep*g.frameSize, int64(len(got)))
	require.Equal(t, head, got[:1000])
	require.Equal(t, make([]byte, len(got)-1000), got[1000:])

	// No growth while the next frame is far from the end.
	g.afterCommit(walGrowStep - walGrowAhead - 1)
	require.Equal(t, 1000+walGrowStep*g.frameSize, fileSize(t, db+"-wal"))

	// Then up to the limit, and no further.
	for range 4 {
		g.afterCommit(walGrowStep)
	}
	require.Equal(t, g.limit, fileSize(t, db+"-wal"))
	require.True(t, g.done)
}

// TestWALGrowerFailureStopsGrowing: a WAL that cannot be grown (here,
// missing) stops the growing for good, with no error to the commits.
func TestWALGrowerFailureStopsGrowing(t *testing.T) {
	db := filepath.Join(t.TempDir(), "x.db")
	var logged bytes.Buffer
	g := newWALGrower(db, 4096, walGrowStep, slog.New(slog.NewTextHandler(&logged, nil)))
	g.afterCommit(3)
	require.True(t, g.done)
	require.Contains(t, logged.String(), "WAL not grown")
	_, err := os.Stat(db + "-wal")
	require.ErrorIs(t, err, os.ErrNotExist, "nothing created")
	g.afterCommit(3) // and nothing happens any more
}

// growingWAL gives s's writer a walGrower if it has none (its directory
// is in memory), as on a disk.
func growingWAL(t *testing.T, s *Store) {
	t.Helper()
	raw(t, s, func(w *writer) error {
		if w.wal == nil {
			var pageSize int64
			if err := w.conn.QueryRowContext(t.Context(), "PRAGMA page_size").Scan(&pageSize); err != nil {
				return err
			}
			w.wal = newWALGrower(s.Path(), pageSize, walCheckpointPages, slog.New(slog.DiscardHandler))
		}
		return nil
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}

// TestWALNotGrownInMemory: a database on a file system in memory has no
// WAL grower, since its syncs write nothing.
func TestWALNotGrownInMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the WAL is grown on Linux only")
	}
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm here")
	}
	require.False(t, growWAL("/dev/shm"))
	dir, err := os.MkdirTemp("/dev/shm", "walgrow")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := openPath(t, filepath.Join(dir, "x.db"), nil)
	require.Nil(t, s.w.wal)
}

// TestWALGrowerNeverOverwrites: bytes another writer appended since the
// grower last grew the file are kept, the zeros going after them (and the
// zeros are appended, so neither would bytes appended while it grows it).
func TestWALGrowerNeverOverwrites(t *testing.T) {
	db := filepath.Join(t.TempDir(), "x.db")
	require.NoError(t, os.WriteFile(db+"-wal", []byte("head"), 0o600))
	g := newWALGrower(db, 100, 2*walGrowStep, slog.New(slog.DiscardHandler))
	g.afterCommit(0)
	size := fileSize(t, db+"-wal")

	// Another process's connection appends a frame past the zeros, and
	// then this one grows the file from the size it last saw.
	frame := bytes.Repeat([]byte{0x5A}, 124)
	f, err := os.OpenFile(db+"-wal", os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(frame)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, g.grow(size+10*g.frameSize))

	got, err := os.ReadFile(db + "-wal")
	require.NoError(t, err)
	require.Equal(t, frame, got[size:size+124])
	require.Equal(t, make([]byte, len(got)-int(size)-124), got[size+124:])
}
