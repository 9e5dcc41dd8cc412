//go:build !linux

package snapshot

import (
	"errors"
	"os"
)

// inotify exists on Linux only; elsewhere a Cache never watches and a Take
// after unknown writes walks the workspace.
type inotify struct{}

func openInotify() (*inotify, error) { return nil, errors.ErrUnsupported }

func (*inotify) add(*os.File) (int32, error) { return 0, errors.ErrUnsupported }
func (*inotify) remove(int32)                {}
func (*inotify) read(func(watchEvent)) error { return nil }
func (*inotify) close()                      {}
func isWatchLimit(error) bool                { return false }
