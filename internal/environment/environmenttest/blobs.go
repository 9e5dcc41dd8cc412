package environmenttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
)

// ErrBlobNotFound is what Blobs.BlobGet returns for a digest it does not
// hold (the store's ErrNotFound stands behind a real backend).
var ErrBlobNotFound = errors.New("blob not found")

// Blobs is an in-memory snapshot.Blobs, the server's store of blobs in
// the suite, that counts the blobs fetched by digest: how the suite sees
// that an environment fetches only the blobs its side lacks.
type Blobs struct {
	mu   sync.Mutex
	m    map[string][]byte
	gets map[string]int
}

// NewBlobs returns an empty Blobs.
func NewBlobs() *Blobs { return &Blobs{m: make(map[string][]byte), gets: make(map[string]int)} }

// BlobPut implements snapshot.Blobs; data must hash to digest.
func (b *Blobs) BlobPut(_ context.Context, digest string, data []byte) error {
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != digest {
		return errors.New("blob put: digest does not match the data")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[digest]; !ok {
		b.m[digest] = append([]byte(nil), data...) // the caller reuses its buffer
	}
	return nil
}

// BlobGet implements snapshot.Blobs.
func (b *Blobs) BlobGet(_ context.Context, digest string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.m[digest]
	if !ok {
		return nil, ErrBlobNotFound
	}
	b.gets[digest]++
	return append([]byte(nil), data...), nil
}

// BlobHas implements snapshot.Blobs.
func (b *Blobs) BlobHas(_ context.Context, digest string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.m[digest]
	return ok, nil
}

// Gets returns how many times the blob of digest was fetched.
func (b *Blobs) Gets(digest string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gets[digest]
}

// Digest is the content address of data.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
