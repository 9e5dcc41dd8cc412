package engine

import (
	"context"
	"sync"
	"time"
)

// A person's read or change of a runner session's files opens the
// session's environment on the runner for the request's time
// (runnerfiles.go), and a stop of an environment whose workspace another
// environment has open is refused (environment.ErrBusy). An idle stop
// that came during a person's short read would then be journaled as
// refused and put off by the idle time, doubled. personOpens counts the
// environments this node's people's requests hold open, by workspace, so
// that the idle stop (stopEnvironment) waits for them to end, at most
// personOpenWait, and tries once more before it counts a refusal (also
// when none holds it by the time it waits: one may have just ended; when
// what made it busy was no person's, a call in flight or a sub-agent,
// the second try is refused as the first, one round trip more).

// personOpenWait bounds how long an idle stop waits for people's requests
// holding the environment open: a listing or a download of at most
// MaxFileBytes over the link.
const personOpenWait = 10 * time.Second

type personOpens struct {
	mu sync.Mutex
	m  map[string]*personOpen
}

type personOpen struct {
	n int
	// ended is closed when n drops to 0.
	ended chan struct{}
}

// begin counts one more open of workspace ws; the returned func uncounts
// it (once).
func (p *personOpens) begin(ws string) (end func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*personOpen{}
	}
	o := p.m[ws]
	if o == nil {
		o = &personOpen{ended: make(chan struct{})}
		p.m[ws] = o
	}
	o.n++
	return sync.OnceFunc(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if o.n--; o.n == 0 {
			close(o.ended)
			delete(p.m, ws)
		}
	})
}

// wait waits until no person's request of this node holds workspace ws
// open, or ctx ends; it reports whether none does.
func (p *personOpens) wait(ctx context.Context, ws string) bool {
	p.mu.Lock()
	o := p.m[ws]
	p.mu.Unlock()
	if o == nil {
		return true
	}
	select {
	case <-o.ended:
		return true
	case <-ctx.Done():
		return false
	}
}
