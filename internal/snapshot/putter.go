package snapshot

import (
	"context"
	"fmt"
	"sync"
)

// Storing blobs in the background.
//
// A walk reads and hashes files on its own goroutine and hands each new
// blob to a goroutine that asks the store about it and stores it, so that
// hashing and the store's work (most of a first snapshot's time: SQLite
// writing 270 MB into its log) run on different cores instead of one
// waiting for the other.
//
// One goroutine, not several: with eight, the SQLite store committed
// several blobs at once, but on the loaded 2-core machine the first
// snapshot of the large tree took longer in wall time (3 of 3 alternated
// runs) for the same CPU time; with one it took less in 4 of 5 runs, and
// less CPU time. An incremental Take, of a few blobs, stores them itself.
//
// What the Cache learns from a Take (a file's digests, a blob stored) is
// kept only once its blobs are stored: a Take that fails leaves no file
// vouched for whose content is not in the store.

// putWorkers is how many blobs are stored at once; maxPutBytes bounds the
// bytes waiting for them (the copies of chunks the Take's buffer held).
const (
	putWorkers  = 1
	maxPutBytes = 32 << 20
)

// putter stores blobs for one Take.
type putter struct {
	ctx   context.Context
	b     Blobs
	cache *Cache
	jobs  chan putJob
	wg    sync.WaitGroup
	// room holds the bytes waiting (a semaphore of maxPutBytes).
	room chan struct{}

	mu       sync.Mutex
	err      error
	newBlobs int
	newBytes int64
}

type putJob struct {
	digest string
	data   []byte
	what   string // for the error: "content of \"a.txt\"", "tree of \"dir\""
	units  int    // of room taken
}

// pendingFile is a file's entry for the Cache, kept once the Take's
// blobs are stored.
type pendingFile struct {
	rel    string
	id     fileID
	sha    string
	chunks []Chunk
}

// putUnit is the granularity of room: a blob takes ceil(size/putUnit).
const putUnit = 64 << 10

func newPutter(ctx context.Context, b Blobs, cache *Cache) *putter {
	p := &putter{ctx: ctx, b: b, cache: cache, jobs: make(chan putJob), room: make(chan struct{}, maxPutBytes/putUnit)}
	for range putWorkers {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

// put queues blob digest (data is copied: the caller reuses its buffer).
// It returns the error of an earlier blob, if one failed.
func (p *putter) put(digest string, data []byte, what string) error {
	if err := p.failed(); err != nil {
		return err
	}
	units := min(max(1, (len(data)+putUnit-1)/putUnit), cap(p.room))
	for range units {
		select {
		case p.room <- struct{}{}:
		case <-p.ctx.Done():
			return p.ctx.Err()
		}
	}
	select {
	case p.jobs <- putJob{digest: digest, data: append([]byte(nil), data...), what: what, units: units}:
		return nil
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

func (p *putter) work() {
	defer p.wg.Done()
	for j := range p.jobs {
		err := p.failed()
		if err == nil {
			err = p.store(j)
		}
		for range j.units {
			<-p.room
		}
		if err != nil {
			p.fail(err)
		}
	}
}

// store asks the store about blob j and stores it if missing.
func (p *putter) store(j putJob) error {
	stored, err := storeBlob(p.ctx, p.b, p.cache, j.digest, j.data, j.what)
	if stored {
		p.mu.Lock()
		p.newBlobs++
		p.newBytes += int64(len(j.data))
		p.mu.Unlock()
	}
	return err
}

// storeBlob stores blob digest (what it is, for the error) unless the
// store has it, and reports whether it stored it.
func storeBlob(ctx context.Context, b Blobs, cache *Cache, digest string, data []byte, what string) (bool, error) {
	has, err := b.BlobHas(ctx, digest)
	if err != nil {
		return false, fmt.Errorf("store %s: %w", what, err)
	}
	if !has {
		if err := b.BlobPut(ctx, digest, data); err != nil {
			return false, fmt.Errorf("store %s: %w", what, err)
		}
	}
	if cache != nil {
		cache.putStored(digest)
	}
	return !has, nil
}

func (p *putter) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *putter) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// finish waits for every blob queued and returns the first error.
func (p *putter) finish() (newBlobs int, newBytes int64, err error) {
	close(p.jobs)
	p.wg.Wait()
	return p.newBlobs, p.newBytes, p.err
}

// flush waits for the blobs queued by the Take; once they are all stored
// the Cache keeps the digests of the files read.
func (t *taker) flush() error {
	if t.puts != nil {
		n, bytes, err := t.puts.finish()
		t.puts = nil
		t.st.NewBlobs += n
		t.st.NewBytes += bytes
		if err != nil {
			t.files = nil
			return err
		}
	}
	if t.cache != nil {
		for _, f := range t.files {
			t.cache.putFile(t.start, t.rootPath, f.rel, f.id, f.sha, f.chunks)
		}
	}
	t.files = nil
	return nil
}
