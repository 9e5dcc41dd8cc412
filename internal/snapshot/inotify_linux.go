//go:build linux

package snapshot

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// watchMask is what a watched directory reports: every change of its
// entries' names, contents, modes and times. Reads (IN_ACCESS, IN_OPEN,
// IN_CLOSE_NOWRITE) are not asked for: a Take's own reads must not make the
// next Take look again, and a command reading the whole tree must not
// overflow the queue.
const watchMask = syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO |
	syscall.IN_MODIFY | syscall.IN_CLOSE_WRITE | syscall.IN_ATTRIB |
	syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF | syscall.IN_ONLYDIR

// inotify is one inotify instance, non-blocking: read returns what the
// kernel queued so far. The kernel queues a write's event before the write
// returns, so once a command has ended, one read sees all its changes.
type inotify struct {
	f   *os.File // closed by Close, or by its finalizer if the Cache is dropped
	rc  syscall.RawConn
	buf []byte
}

func openInotify() (*inotify, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &inotify{f: f, rc: rc, buf: make([]byte, 64<<10)}, nil
}

// add watches the directory open as dir and returns its watch descriptor
// (the same one for a directory watched already). The directory is named
// through its open descriptor, so a path swapped meanwhile for a symlink
// cannot put the watch outside the workspace.
func (n *inotify) add(dir *os.File) (int32, error) {
	dc, err := dir.SyscallConn()
	if err != nil {
		return 0, err
	}
	var wd int
	var werr error
	cerr := dc.Control(func(dfd uintptr) {
		if err := n.rc.Control(func(ifd uintptr) {
			wd, werr = syscall.InotifyAddWatch(int(ifd), "/proc/self/fd/"+strconv.Itoa(int(dfd)), watchMask)
		}); err != nil {
			werr = err
		}
	})
	if cerr != nil {
		return 0, cerr
	}
	if werr != nil {
		return 0, fmt.Errorf("inotify_add_watch: %w", werr)
	}
	return int32(wd), nil
}

// remove stops watching wd (gone already is fine).
func (n *inotify) remove(wd int32) {
	_ = n.rc.Control(func(ifd uintptr) {
		_, _ = syscall.InotifyRmWatch(int(ifd), uint32(wd))
	})
}

// read hands every queued event to handle and returns once the queue is
// empty.
func (n *inotify) read(handle func(watchEvent)) error {
	for {
		var nr int
		var rerr error
		if err := n.rc.Read(func(fd uintptr) bool {
			nr, rerr = syscall.Read(int(fd), n.buf)
			return true // never wait: empty means done
		}); err != nil {
			return err
		}
		switch {
		case errors.Is(rerr, syscall.EAGAIN):
			return nil
		case errors.Is(rerr, syscall.EINTR):
			continue
		case rerr != nil:
			return fmt.Errorf("read inotify: %w", rerr)
		case nr < syscall.SizeofInotifyEvent:
			return fmt.Errorf("read inotify: short read of %d bytes", nr)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= nr; {
			raw := (*syscall.InotifyEvent)(unsafe.Pointer(&n.buf[off]))
			end := off + syscall.SizeofInotifyEvent + int(raw.Len)
			if end > nr {
				return errors.New("read inotify: truncated event")
			}
			name := n.buf[off+syscall.SizeofInotifyEvent : end]
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			m := raw.Mask
			handle(watchEvent{
				wd:       raw.Wd,
				name:     string(name),
				overflow: m&syscall.IN_Q_OVERFLOW != 0,
				ignored:  m&syscall.IN_IGNORED != 0,
				selfGone: m&(syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF|syscall.IN_UNMOUNT) != 0,
				dirMoved: m&syscall.IN_ISDIR != 0 && m&(syscall.IN_MOVED_FROM|syscall.IN_MOVED_TO) != 0,
			})
			off = end
		}
	}
}

func (n *inotify) close() { n.f.Close() }

// isWatchLimit tells an error of add that says the user's watches (or the
// kernel's memory for them) ran out.
func isWatchLimit(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.ENOMEM)
}
