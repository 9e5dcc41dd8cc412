package sqlite

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	msqlite "modernc.org/sqlite"
)

// A commit syncs the WAL with fdatasync(2), and finds the WAL's blocks
// already there, so that its sync writes the frames and flushes the disk's
// cache, and not the file's inode too.
//
// fsync(2), the transpiled library's default, writes the inode whenever its
// timestamps changed, which every commit's writes do; fdatasync(2) writes
// it only when what reading the data back needs changed: the file's size
// or its blocks, which a commit appending to the WAL changes. On ext4 that
// inode write is a synchronous I/O of its own, submitted and waited for
// between the frames' and the cache flush: on this project's virtual disk
// about 50 µs of CPU a commit (the request's doorbell, its interrupt, a
// sleep and a wake-up), and a third wait in the commit's latency.
// Durability is the same: fdatasync flushes the data and every piece of
// metadata needed to read it back (POSIX's synchronized I/O data
// integrity), which is why SQLite's own builds use it wherever their
// configure script finds it (every Linux distribution's).

// syncWithFdatasync switches modernc.org/sqlite to fdatasync, process-wide
// (it is a setting of the library, not of a connection). Where the
// platform has no fdatasync, SQLite keeps its own sync.
var syncWithFdatasync = sync.OnceFunc(func() {
	_, _ = msqlite.Fdatasync(true)
})

// How far ahead of the writer's commits the WAL is grown, in frames (a
// page and its 24-byte header): grown by walGrowStep frames once the next
// frame is within walGrowAhead frames of the file's end. A serial commit
// writes about a dozen frames, a full batch of appends about 1,700: a commit
// that outruns the zeros grows the file itself, as without them.
const (
	walGrowStep  = 512
	walGrowAhead = 256
	// walHeaderSize is the size of the WAL file's header, before the first
	// frame.
	walHeaderSize = 32
	// walFrameHeaderSize is the size of a frame's header, before its page.
	walFrameHeaderSize = 24
)

// walGrower extends the WAL file with zeros ahead of the writer's commits,
// up to the size at which SQLite starts writing it again from its
// beginning (a checkpoint has copied it all: the writer's own automatic
// checkpoint, at walCheckpointPages pages, copies at the latest there). So
// the WAL grows once after each Open, in a few large writes, rather than
// at every commit, and once it is that large it stays so (SQLite truncates
// it only with a journal_size_limit, which the store does not set, or when
// its last connection closes, when it removes it).
//
// Only the writer's goroutine uses it, between transactions. The zeros are
// appended (O_APPEND): the kernel writes each block at the file's end as it
// is at that moment, so they never overwrite a frame, even one another
// process's connection (longhaul import, say, beside a server) appended
// since the file's size was read; a frame written later over the zeros is
// SQLite's as ever. To SQLite what follows the last valid frame is not
// part of the log: a frame of zeros has not the salt of the WAL's header,
// and a reader, or the recovery after a crash, stops at the first frame
// that has not, as it does at the frames of an older generation when the
// WAL was started again from its beginning. The zeros are not synced here:
// the next commit's fdatasync flushes them with the file's new size, once
// for the whole growth.
// SQLite locks the database and the -shm file, never the WAL, so closing
// this descriptor of the WAL releases no lock of SQLite's.
type walGrower struct {
	path      string
	frameSize int64 // bytes: a page and its frame header
	limit     int64 // bytes: never grown past this
	log       *slog.Logger

	// next is an upper bound of the offset of SQLite's next frame: the
	// file's end at the first commit, then advanced by every commit's
	// frames (after SQLite starts the WAL again from its beginning it is
	// further than the truth, which only makes the growth end sooner).
	// -1 before the first commit.
	next int64
	size int64 // the file's size as last seen or made
	done bool  // grown to the limit, or growing failed
}

// newWALGrower returns a grower for the WAL of the database at dbPath,
// whose pages are pageSize bytes, never growing it past maxFrames frames.
func newWALGrower(dbPath string, pageSize, maxFrames int64, log *slog.Logger) *walGrower {
	frame := pageSize + walFrameHeaderSize
	return &walGrower{
		path:      dbPath + "-wal",
		frameSize: frame,
		limit:     walHeaderSize + maxFrames*frame,
		log:       log,
		next:      -1,
	}
}

// afterCommit accounts for a commit that wrote pages frames and grows the
// file if SQLite's next frame is near its end. A failure stops the growing
// for the store's life, with a warning: SQLite grows the WAL itself, as it
// always could.
func (g *walGrower) afterCommit(pages int64) {
	if g == nil || g.done {
		return
	}
	if g.next < 0 {
		// The first commit appended its frames at the file's end.
		fi, err := os.Stat(g.path)
		if err != nil {
			g.fail(err)
			return
		}
		g.next, g.size = fi.Size(), fi.Size()
	} else {
		g.next += pages * g.frameSize
	}
	if g.next+walGrowAhead*g.frameSize <= g.size {
		return
	}
	if err := g.grow(min(g.limit, g.next+walGrowStep*g.frameSize)); err != nil {
		g.fail(err)
	}
}

// grow appends zeros to the file until it is about target bytes long (more
// if another process appended meanwhile).
func (g *walGrower) grow(target int64) error {
	f, err := os.OpenFile(g.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	end := fi.Size()
	if end < target {
		if err := appendZeros(f, target-end); err != nil {
			return err
		}
		end = target
	}
	g.size = end
	if end >= g.limit {
		g.done = true
	}
	return f.Close()
}

func (g *walGrower) fail(err error) {
	g.done = true
	g.log.Warn("sqlite WAL not grown ahead of the commits; they grow it themselves", "err", err)
}

// zeroBlock is what appendZeros writes, a block at a time.
var zeroBlock [64 << 10]byte

// appendZeros appends n zero bytes to f, opened with O_APPEND.
func appendZeros(f *os.File, n int64) error {
	for n > 0 {
		k := min(int64(len(zeroBlock)), n)
		w, err := f.Write(zeroBlock[:k])
		if err != nil {
			return fmt.Errorf("grow %s: %w", f.Name(), err)
		}
		if int64(w) < k {
			return fmt.Errorf("grow %s: %w", f.Name(), io.ErrShortWrite)
		}
		n -= k
	}
	return nil
}
