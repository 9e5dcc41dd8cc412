package sqlite

import "golang.org/x/sys/unix"

// growWAL reports whether the WAL of a database in dir is worth growing
// ahead of the commits (walGrower): on a file system in memory a sync
// writes nothing, so zeros written ahead are only a cost (a copy of every
// byte the WAL will hold). If the file system cannot be told, it is grown.
func growWAL(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return true
	}
	return st.Type != unix.TMPFS_MAGIC && st.Type != unix.RAMFS_MAGIC
}
