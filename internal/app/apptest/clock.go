package apptest

import (
	"sync"
	"time"
)

// Clock is a clock only a test moves (an App's Deps.Now, a server's
// Config.Now): what it says next never depends on how fast the test ran.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock set to t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the time the clock is set to.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set sets the clock to t; Advance moves it by d.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
