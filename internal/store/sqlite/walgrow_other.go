//go:build !linux

package sqlite

// growWAL reports whether the WAL of a database in dir is worth growing
// ahead of the commits (walGrower): only where commits sync with
// fdatasync, which SQLite's library uses on Linux alone.
func growWAL(string) bool { return false }
