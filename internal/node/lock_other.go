//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package node

// LockDataDir has no portable advisory lock to take on this platform; two
// processes on one data directory are then the operator's to avoid.
func LockDataDir(string) (unlock func(), err error) {
	return func() {}, nil
}
