package freespace

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// DefaultFloorMiB is the floor of `serve --min-free-mb`: enough for SQLite
// to checkpoint its WAL and for a few workspace snapshots, small next to
// any disk a server runs on.
const DefaultFloorMiB = 256

const mib = 1 << 20

// Volume is one directory watched and the name it goes by in messages: an
// operator's own path is never shown to API clients, only what the
// directory is for ("the data volume").
type Volume struct {
	Dir  string
	Name string
}

// Config tunes a Monitor. Zero fields mean the default in their comment.
type Config struct {
	// Free returns the bytes available to the server on the volume holding
	// dir. Default: statfs(2)'s available blocks (what an unprivileged
	// writer may still use).
	Free func(dir string) (uint64, error)
	// Logger is told when the space goes below the floor and when it
	// returns. Default: a logger that discards everything.
	Logger *slog.Logger
}

// Monitor checks volumes against a floor. Its methods are safe for
// concurrent use.
type Monitor struct {
	vols  []Volume
	floor uint64
	free  func(string) (uint64, error)
	log   *slog.Logger

	mu  sync.Mutex
	low bool // as of the last check, for logging the transitions only
}

// New returns a monitor of vols with a floor of floorMiB mebibytes. A floor
// of 0 turns the checks off (Check always returns nil).
func New(vols []Volume, floorMiB int64, cfg *Config) (*Monitor, error) {
	if floorMiB < 0 {
		return nil, fmt.Errorf("free space floor: %d MiB is negative", floorMiB)
	}
	for i, v := range vols {
		if v.Dir == "" || v.Name == "" {
			return nil, fmt.Errorf("free space volume %d: Dir and Name are required", i)
		}
	}
	m := &Monitor{vols: vols, floor: uint64(floorMiB) * mib, free: statfsFree, log: slog.New(slog.DiscardHandler)}
	if cfg != nil && cfg.Free != nil {
		m.free = cfg.Free
	}
	if cfg != nil && cfg.Logger != nil {
		m.log = cfg.Logger
	}
	return m, nil
}

// LowError says a volume has less free space than the floor. It wraps
// store.ErrStorageFull, so callers handle it as a full disk.
type LowError struct {
	// Name is what the volume holds ("the data volume").
	Name        string
	Free, Floor uint64
}

func (e *LowError) Error() string {
	return fmt.Sprintf("%s is nearly full: %d MiB free, below the floor of %d MiB", e.Name, e.Free/mib, e.Floor/mib)
}

func (e *LowError) Unwrap() error { return store.ErrStorageFull }

// Check asks every volume for its free space now. It returns nil when each
// has at least the floor, else a *LowError for the one with the least. A
// volume whose free space cannot be read does not count as full (the
// writes themselves will say if it is): the error is logged.
func (m *Monitor) Check() error {
	if m == nil || m.floor == 0 {
		return nil
	}
	var worst *LowError
	for _, v := range m.vols {
		free, err := m.free(v.Dir)
		if err != nil {
			m.log.Warn("read free space", "volume", v.Name, "dir", v.Dir, "err", err)
			continue
		}
		if free < m.floor && (worst == nil || free < worst.Free) {
			worst = &LowError{Name: v.Name, Free: free, Floor: m.floor}
		}
	}
	m.mu.Lock()
	wasLow := m.low
	m.low = worst != nil
	m.mu.Unlock()
	switch {
	case worst != nil && !wasLow:
		m.log.Error("free space below the floor: no new work is taken until space is freed",
			"volume", worst.Name, "free_mib", worst.Free/mib, "floor_mib", worst.Floor/mib)
	case worst == nil && wasLow:
		m.log.Info("free space is back above the floor: taking work again", "floor_mib", m.floor/mib)
	}
	if worst == nil {
		return nil
	}
	return worst
}

// IsLow reports whether err is a Monitor's verdict of too little space.
func IsLow(err error) bool {
	var le *LowError
	return errors.As(err, &le)
}
