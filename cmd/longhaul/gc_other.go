//go:build !linux

package main

// availableMemory is 0, unknown, on systems other than Linux: the
// collector keeps Go's defaults there (see gcDefaults).
func availableMemory() int64 { return 0 }
