package engine

import "context"

// ListenForTest starts only e's subscription to the store's notifications
// (no scheduler: e claims nothing), as a node that runs no session of the
// test would hear them; the returned func stops it.
func (e *Engine) ListenForTest(ctx context.Context) (stop func()) {
	e.hub.start(ctx)
	return e.hub.stop
}
