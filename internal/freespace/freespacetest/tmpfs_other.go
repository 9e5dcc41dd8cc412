//go:build !linux

package freespacetest

import "testing"

// MountTmpfs skips the test: mounting a tmpfs needs Linux.
func MountTmpfs(t testing.TB, _ int) string {
	t.Helper()
	skip(t, "mounting a tmpfs needs Linux")
	return ""
}

// Fill is never reached: MountTmpfs skipped the test.
func Fill(t testing.TB, _ string, _ int) string {
	t.Helper()
	skip(t, "filling a tmpfs needs Linux")
	return ""
}
