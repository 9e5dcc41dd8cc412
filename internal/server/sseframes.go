package server

import (
	"sync"

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
	// mu is read-locked to look a frame up: a thousand streams look up
	// each event's frame, and only the first stores it.
	mu       sync.RWMutex
	cur, old map[frameKey][]byte
	curBytes int
}

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
	c.mu.RLock()
	f, ok := c.cur[key]
	if !ok {
		f, ok = c.old[key]
	}
	c.mu.RUnlock()
	if ok {
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
	return f, nil
}
