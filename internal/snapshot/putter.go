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

// The blobs queued while the store was busy are stored together, in one
// transaction, by a store that can (BatchBlobs): the first snapshot of a
// large tree (15,000 files) otherwise spent most of its time on a commit
// and a hand-off to the store's writer per blob. A batch is only what is
// already queued: none waits for more, so a lone blob is not delayed.

// putWorkers is how many goroutines store blobs; maxPutBytes bounds the
// bytes waiting for them (the copies of chunks the Take's buffer held).
// maxBatchBlobs and maxBatchBytes bound one batch: a transaction that
// keeps the store's writer (shared with the sessions' appends) for a
// few milliseconds at most.
const (
	putWorkers    = 1
	maxPutBytes   = 32 << 20
	maxBatchBlobs = 256
	maxBatchBytes = 8 << 20
)

// BatchBlobs is a Blobs that stores several blobs in one transaction (all
// or none stored once it returns). store.Store satisfies it.
type BatchBlobs interface {
	Blobs
	BlobPutMany(ctx context.Context, blobs map[string][]byte) error
}

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
	// Every job holds room, so room alone bounds what waits; jobs has
	// space for as many, so that the blobs queued are there to batch.
	room := make(chan struct{}, maxPutBytes/putUnit)
	p := &putter{ctx: ctx, b: b, cache: cache, jobs: make(chan putJob, cap(room)), room: room}
	for range putWorkers {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

// put queues blob digest; data is copied unless owned (the caller does
// not reuse it). It returns the error of an earlier blob, if one failed.
func (p *putter) put(digest string, data []byte, what string, owned bool) error {
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
	if !owned {
		data = append([]byte(nil), data...)
	}
	select {
	case p.jobs <- putJob{digest: digest, data: data, what: what, units: units}:
		return nil
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

func (p *putter) work() {
	defer p.wg.Done()
	batch := make([]putJob, 0, maxBatchBlobs)
	for j := range p.jobs {
		batch = append(batch[:0], j)
		bytes := len(j.data)
	gather:
		for len(batch) < maxBatchBlobs && bytes < maxBatchBytes {
			select {
			case j, ok := <-p.jobs:
				if !ok {
					break gather
				}
				batch = append(batch, j)
				bytes += len(j.data)
			default:
				break gather
			}
		}
		err := p.failed()
		if err == nil {
			err = p.store(batch)
		}
		for _, j := range batch {
			for range j.units {
				<-p.room
			}
		}
		clear(batch) // drop the data for the collector
		if err != nil {
			p.fail(err)
		}
	}
}

// store asks the store about the blobs of batch and stores those missing,
// in one transaction if the store can.
func (p *putter) store(batch []putJob) error {
	bb, ok := p.b.(BatchBlobs)
	if !ok || len(batch) == 1 {
		for _, j := range batch {
			stored, err := storeBlob(p.ctx, p.b, p.cache, j.digest, j.data, j.what)
			if stored {
				p.count(1, len(j.data))
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	missing := make(map[string][]byte, len(batch))
	bytes := 0
	lacks, err := lacking(p.ctx, p.b, batch)
	if err != nil {
		return err
	}
	for _, j := range batch {
		if lacks(j.digest) {
			missing[j.digest] = j.data
			bytes += len(j.data)
		}
	}
	if len(missing) > 0 {
		if err := bb.BlobPutMany(p.ctx, missing); err != nil {
			return fmt.Errorf("store %s and %d other blobs: %w", batch[0].what, len(batch)-1, err)
		}
	}
	if p.cache != nil {
		for _, j := range batch {
			p.cache.putStored(j.digest)
		}
	}
	p.count(len(missing), bytes)
	return nil
}

// lacking asks the store which blobs of batch it lacks: in one call when
// it can (ManyBlobs), else blob by blob.
func lacking(ctx context.Context, b Blobs, batch []putJob) (func(digest string) bool, error) {
	if mb, ok := b.(ManyBlobs); ok {
		digests := make([]string, len(batch))
		for i, j := range batch {
			digests[i] = j.digest
		}
		missing, err := mb.BlobHasMany(ctx, digests)
		if err != nil {
			return nil, fmt.Errorf("store %s and %d other blobs: %w", batch[0].what, len(batch)-1, err)
		}
		return func(d string) bool { return missing[d] }, nil
	}
	missing := make(map[string]bool, len(batch))
	for _, j := range batch {
		has, err := b.BlobHas(ctx, j.digest)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", j.what, err)
		}
		missing[j.digest] = !has
	}
	return func(d string) bool { return missing[d] }, nil
}

// count adds blobs the store did not have to the Take's stats.
func (p *putter) count(blobs, bytes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.newBlobs += blobs
	p.newBytes += int64(bytes)
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

// storeBatch stores the blobs an incremental Take kept (taker.put), those
// the store lacks in one transaction, and tells the Cache they are stored.
func (t *taker) storeBatch() (err error) {
	batch := t.batch
	t.batch, t.batchBytes = nil, 0
	if len(batch) == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			// Not stored: the walk an incremental Take falls back to
			// must put them again, not skip them as seen.
			for _, j := range batch {
				delete(t.seen, j.digest)
			}
		}
	}()
	missing, err := lacking(t.ctx, t.b, batch)
	if err != nil {
		return err
	}
	blobs := make(map[string][]byte, len(batch))
	var bytes int64
	for _, j := range batch {
		if missing(j.digest) {
			blobs[j.digest] = j.data
			bytes += int64(len(j.data))
		}
	}
	if len(blobs) > 0 {
		if err := t.b.(BatchBlobs).BlobPutMany(t.ctx, blobs); err != nil {
			return fmt.Errorf("store %s and %d other blobs: %w", batch[0].what, len(batch)-1, err)
		}
	}
	if t.cache != nil {
		for _, j := range batch {
			t.cache.putStored(j.digest)
		}
	}
	t.st.NewBlobs += len(blobs)
	t.st.NewBytes += bytes
	return nil
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
	if err := t.storeBatch(); err != nil {
		t.files = nil
		return err
	}
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
