package server

import (
	"sync"
	"sync/atomic"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// frameCache shares the encoded frames of session streams: when many
// clients follow one session, each event is encoded once, not once per
// client. A journal's events never change once appended, so a frame kept
// is the frame any stream of that session would encode for that seq.
//
// It keeps two generations of at most frameCacheSize frames and about
// frameCacheBytes each: when the current one fills up it becomes the old
// one and the older is dropped, so the frames of events just appended are
// found and the memory is bounded without a list to keep in order.
type frameCache struct {
	// recent holds the frames looked up last, without a lock: the
	// streams of a session all look up an event's frame at the moment it
	// is appended, and on a lock a thousand of them would queue (the
	// first one's store holding the others up). A frame's slot is its
	// seq modulo frameRecentSlots; a slot holding another frame is a
	// miss, served by the maps.
	recent [frameRecentSlots]atomic.Pointer[recentFrame]

	mu       sync.Mutex
	cur, old map[frameKey][]byte
	curBytes int
}

// recentFrame is a frame in frameCache.recent.
type recentFrame struct {
	key   frameKey
	frame []byte
}

// frameRecentSlots is how many frames frameCache.recent holds, and
// frameRecentBytes the largest it holds (so it stays within 8 MiB).
const (
	frameRecentSlots = 64
	frameRecentBytes = 128 << 10
)

// frameCacheSize and frameCacheBytes bound each generation of frameCache
// (a frame holds an event's payload, up to the engine's blob threshold).
const (
	frameCacheSize  = 4096
	frameCacheBytes = 8 << 20
)

// frameKey names one event of one session.
type frameKey struct {
	session string
	seq     int64
}

// frame returns the frame of ev, from the cache or encoded by encode (and
// then kept). The frame is shared: write it, never change it.
func (c *frameCache) frame(ev *lt.Event, encode func() ([]byte, error)) ([]byte, error) {
	key := frameKey{ev.SessionID, ev.Seq}
	slot := &c.recent[uint64(ev.Seq)%frameRecentSlots]
	if r := slot.Load(); r != nil && r.key == key {
		return r.frame, nil
	}
	c.mu.Lock()
	f, ok := c.cur[key]
	if !ok {
		f, ok = c.old[key]
	}
	c.mu.Unlock()
	if ok {
		c.remember(slot, key, f)
		return f, nil
	}
	// Encoded outside the lock: the streams of other sessions need not
	// wait for it. Two streams may both encode a new event; both get the
	// same bytes.
	f, err := encode()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cur) >= frameCacheSize || c.curBytes+len(f) > frameCacheBytes {
		c.old, c.cur, c.curBytes = c.cur, nil, 0
	}
	if c.cur == nil {
		c.cur = make(map[frameKey][]byte)
	}
	c.cur[key] = f
	c.curBytes += len(f)
	c.remember(slot, key, f)
	return f, nil
}

// remember puts a frame in its slot of recent, unless it is too large.
func (c *frameCache) remember(slot *atomic.Pointer[recentFrame], key frameKey, f []byte) {
	if len(f) <= frameRecentBytes {
		slot.Store(&recentFrame{key: key, frame: f})
	}
}
