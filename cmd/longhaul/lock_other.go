//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

// lockDataDir has no portable advisory lock to take on this platform; two
// processes on one data directory are then the operator's to avoid.
func lockDataDir(string) (unlock func(), err error) {
	return func() {}, nil
}
