package scripted

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// scriptCache keeps the most recently used parsed scripts, keyed by the
// SHA-256 of the script's bytes: every call of a session (and every session
// of one agent) sends the same script, and parsing it on each call would cost
// more than the call. It is bounded so a long-running server that sees many
// distinct scripts does not grow without limit. Cached steps are never handed
// out: Respond copies what it returns.
type scriptCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // of *cacheEntry, most recently used first
	byKey map[[sha256.Size]byte]*list.Element
}

type cacheEntry struct {
	key   [sha256.Size]byte
	steps []Step
}

func newScriptCache(size int) *scriptCache {
	return &scriptCache{size: size, order: list.New(), byKey: make(map[[sha256.Size]byte]*list.Element)}
}

// steps returns the parsed script, parsing it on a miss. Invalid scripts are
// not cached: the engine refuses them when a session is created, so they are
// rare here.
func (c *scriptCache) steps(script []byte) ([]Step, error) {
	key := sha256.Sum256(script)
	c.mu.Lock()
	if el, ok := c.byKey[key]; ok {
		c.order.MoveToFront(el)
		steps := el.Value.(*cacheEntry).steps
		c.mu.Unlock()
		return steps, nil
	}
	c.mu.Unlock()

	// Parsed outside the lock so one large script does not stall every other
	// session's call; two goroutines may parse the same script at once, and
	// the second simply finds it cached.
	steps, err := Parse(script)
	if err != nil {
		return nil, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cacheEntry).steps, nil
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key: key, steps: steps})
	for c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.byKey, oldest.Value.(*cacheEntry).key)
	}
	return steps, nil
}

// len is the number of cached scripts.
func (c *scriptCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
