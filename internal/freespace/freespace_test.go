package freespace_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/freespace"
	"github.com/longhaul-dev/longhaul/internal/freespace/freespacetest"
	"github.com/longhaul-dev/longhaul/internal/store"
)

func TestCheckAgainstTheFloor(t *testing.T) {
	t.Parallel()
	var data, work atomic.Uint64
	data.Store(900 << 20)
	work.Store(900 << 20)
	m, err := freespace.New([]freespace.Volume{
		{Dir: "/data", Name: "the data volume"},
		{Dir: "/work", Name: "the workspace volume"},
	}, 256, &freespace.Config{Free: func(dir string) (uint64, error) {
		if dir == "/data" {
			return data.Load(), nil
		}
		return work.Load(), nil
	}})
	require.NoError(t, err)
	require.NoError(t, m.Check())

	work.Store(100 << 20)
	data.Store(200 << 20)
	err = m.Check()
	require.Error(t, err)
	require.True(t, freespace.IsLow(err))
	require.ErrorIs(t, err, store.ErrStorageFull)
	require.True(t, store.IsStorageFull(err))
	// The fullest volume is the one named, by what it holds.
	require.EqualError(t, err, "the workspace volume is nearly full: 100 MiB free, below the floor of 256 MiB")

	work.Store(256 << 20)
	require.EqualError(t, m.Check(), "the data volume is nearly full: 200 MiB free, below the floor of 256 MiB")

	// Space returns: the very next check says so.
	data.Store(1 << 30)
	require.NoError(t, m.Check())
}

func TestUnreadableVolumeIsNotFull(t *testing.T) {
	t.Parallel()
	m, err := freespace.New([]freespace.Volume{{Dir: "/data", Name: "the data volume"}}, 10,
		&freespace.Config{Free: func(string) (uint64, error) { return 0, errors.New("statfs: no such file") }})
	require.NoError(t, err)
	require.NoError(t, m.Check())
}

func TestFloorZeroTurnsChecksOff(t *testing.T) {
	t.Parallel()
	m, err := freespace.New([]freespace.Volume{{Dir: "/data", Name: "the data volume"}}, 0,
		&freespace.Config{Free: func(string) (uint64, error) { return 0, nil }})
	require.NoError(t, err)
	require.NoError(t, m.Check())
	var nilMonitor *freespace.Monitor
	require.NoError(t, nilMonitor.Check())
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := freespace.New(nil, -1, nil)
	require.ErrorContains(t, err, "negative")
	_, err = freespace.New([]freespace.Volume{{Dir: "/data"}}, 1, nil)
	require.ErrorContains(t, err, "Name")
}

// TestStatfsOnARealVolume fills a real tmpfs: the default free-space
// reader sees the ballast, and removing it brings the space back.
func TestStatfsOnARealVolume(t *testing.T) {
	t.Parallel()
	dir := freespacetest.MountTmpfs(t, 16)
	m, err := freespace.New([]freespace.Volume{{Dir: dir, Name: "the data volume"}}, 4, nil)
	require.NoError(t, err)
	require.NoError(t, m.Check())

	ballast := freespacetest.Fill(t, dir, 2)
	err = m.Check()
	require.True(t, freespace.IsLow(err), "check after filling: %v", err)
	require.ErrorContains(t, err, "the data volume is nearly full")

	// A write to the full volume fails with ENOSPC, which counts as full.
	freespacetest.Fill(t, dir, 0)
	werr := os.WriteFile(filepath.Join(dir, "more"), make([]byte, 1<<20), 0o600)
	require.Error(t, werr)
	require.True(t, store.IsStorageFull(werr), "write to a full tmpfs: %v", werr)

	require.NoError(t, os.Remove(ballast))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "more")))
	require.NoError(t, m.Check())
}
