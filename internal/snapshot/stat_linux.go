//go:build linux

package snapshot

import (
	"io/fs"
	"syscall"
)

// identify returns the identity of a file for the Cache; false if the
// platform's stat gives too little to tell a changed file.
func identify(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{
		dev:   uint64(st.Dev), // Dev is not uint64 on every architecture
		ino:   uint64(st.Ino),
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		nlink: uint64(st.Nlink),
	}, true
}
