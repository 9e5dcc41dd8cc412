//go:build !linux

package inotify

import (
	"errors"
	"os"
)

// Event: see inotify_linux.go.
type Event struct {
	Wd                                    int32
	Name                                  string
	Overflow, Ignored, SelfGone, DirMoved bool
}

// Instance exists on Linux only; elsewhere Open fails and callers walk.
type Instance struct{}

// Open fails: not supported here.
func Open() (*Instance, error) { return nil, errors.ErrUnsupported }

func (*Instance) Add(*os.File) (int32, error) { return 0, errors.ErrUnsupported }
func (*Instance) AddFd(int) (int32, error)    { return 0, errors.ErrUnsupported }
func (*Instance) Remove(int32)                {}
func (*Instance) Read(func(Event)) error      { return nil }
func (*Instance) Close()                      {}

// IsWatchLimit is false: there are no watches here.
func IsWatchLimit(error) bool { return false }
