//go:build linux

package inotify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// dirMask is what a watched directory reports: every change of its
// entries' names, contents, modes and times. Reads (IN_ACCESS, IN_OPEN,
// IN_CLOSE_NOWRITE) are not asked for: a walker's own reads must not be
// reported back to it, and a command reading the whole tree must not
// overflow the queue.
const dirMask = syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO |
	syscall.IN_MODIFY | syscall.IN_CLOSE_WRITE | syscall.IN_ATTRIB |
	syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF | syscall.IN_ONLYDIR

// Event is one event of the kernel, told apart as the watchers need.
type Event struct {
	Wd   int32
	Name string // the entry of the watched directory it is about, if any
	// Overflow: events were lost; Ignored: the watch is gone (its
	// directory removed, or the watch removed); SelfGone: the watched
	// directory itself was removed, moved or unmounted; DirMoved: a
	// directory entry was moved in or out.
	Overflow, Ignored, SelfGone, DirMoved bool
}

// Instance is one inotify instance, non-blocking: Read returns what the
// kernel queued so far. The kernel queues a write's event before the write
// returns, so once a command has ended, one Read sees all its changes.
type Instance struct {
	f   *os.File // closed by Close, or by its finalizer if dropped
	rc  syscall.RawConn
	buf []byte
}

// Open opens an instance.
func Open() (*Instance, error) {
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
	return &Instance{f: f, rc: rc, buf: make([]byte, 64<<10)}, nil
}

// Add watches the directory open as dir and returns its watch descriptor
// (the same one for a directory watched already).
func (n *Instance) Add(dir *os.File) (int32, error) {
	dc, err := dir.SyscallConn()
	if err != nil {
		return 0, err
	}
	var wd int32
	var werr error
	if cerr := dc.Control(func(dfd uintptr) { wd, werr = n.AddFd(int(dfd)) }); cerr != nil {
		return 0, cerr
	}
	return wd, werr
}

// AddFd watches the directory open as descriptor dfd. The directory is
// named through its open descriptor, so a path swapped meanwhile for a
// symlink cannot put the watch outside the tree watched.
func (n *Instance) AddFd(dfd int) (int32, error) {
	var wd int
	var werr error
	if err := n.rc.Control(func(ifd uintptr) {
		wd, werr = syscall.InotifyAddWatch(int(ifd), "/proc/self/fd/"+strconv.Itoa(dfd), dirMask)
	}); err != nil {
		return 0, err
	}
	if werr != nil {
		return 0, fmt.Errorf("inotify_add_watch: %w", werr)
	}
	return int32(wd), nil
}

// Remove stops watching wd (gone already is fine).
func (n *Instance) Remove(wd int32) {
	_ = n.rc.Control(func(ifd uintptr) {
		_, _ = syscall.InotifyRmWatch(int(ifd), uint32(wd))
	})
}

// Read hands every queued event to handle and returns once the queue is
// empty.
func (n *Instance) Read(handle func(Event)) error {
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
			// Decoded from the bytes, not through *syscall.InotifyEvent:
			// that Go type is padded past its trailing Name [0]uint8, so
			// an event in the last bytes of a full buffer would straddle
			// the buffer's end (checkptr's fatal error under -race).
			raw := decodeEvent(n.buf[off : off+syscall.SizeofInotifyEvent])
			end := off + syscall.SizeofInotifyEvent + int(raw.Len)
			if end > nr {
				return errors.New("read inotify: truncated event")
			}
			name := n.buf[off+syscall.SizeofInotifyEvent : end]
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			m := raw.Mask
			handle(Event{
				Wd:       raw.Wd,
				Name:     string(name),
				Overflow: m&syscall.IN_Q_OVERFLOW != 0,
				Ignored:  m&syscall.IN_IGNORED != 0,
				SelfGone: m&(syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF|syscall.IN_UNMOUNT) != 0,
				DirMoved: m&syscall.IN_ISDIR != 0 && m&(syscall.IN_MOVED_FROM|syscall.IN_MOVED_TO) != 0,
			})
			off = end
		}
	}
}

// Close releases the instance and its watches.
func (n *Instance) Close() { n.f.Close() }

// IsWatchLimit tells an error of Add that says the user's watches (or the
// kernel's memory for them) ran out.
func IsWatchLimit(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.ENOMEM)
}

// decodeEvent reads the fixed part of an inotify event (struct
// inotify_event, in the machine's byte order) from b.
func decodeEvent(b []byte) syscall.InotifyEvent {
	return syscall.InotifyEvent{
		Wd:     int32(binary.NativeEndian.Uint32(b[0:4])),
		Mask:   binary.NativeEndian.Uint32(b[4:8]),
		Cookie: binary.NativeEndian.Uint32(b[8:12]),
		Len:    binary.NativeEndian.Uint32(b[12:16]),
	}
}
