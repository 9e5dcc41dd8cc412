package metrics

import "sync"

// Values of bounded labels.
const (
	labelOther   = "other"
	labelUnknown = "unknown"
)

// labelLimit keeps the first max distinct values of a label and maps later
// ones to "other". Tool and model names come from agent specs, which API
// clients write; every distinct value is a time series Prometheus keeps, so
// an unbounded label would let a client grow the scrape without limit.
type labelLimit struct {
	mu   sync.Mutex
	max  int
	seen map[string]struct{}
}

func newLabelLimit(max int) *labelLimit {
	return &labelLimit{max: max, seen: make(map[string]struct{})}
}

// value returns v, "unknown" for an empty v, or "other" once max other
// values were seen.
func (l *labelLimit) value(v string) string {
	if v == "" {
		return labelUnknown
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[v]; ok {
		return v
	}
	if len(l.seen) >= l.max {
		return labelOther
	}
	l.seen[v] = struct{}{}
	return v
}

// maxInflightCalls bounds the model calls whose provider is remembered
// between their request and their response.
const maxInflightCalls = 4096

// modelRef names the provider and model of a model call.
type modelRef struct{ provider, model string }

// inflight remembers, per session, the provider and model of its model
// call in flight: model.requested names them, and the response (or
// failure) comes in a later append. A session has at most one call in
// flight; one whose response never comes here (its worker lost the lease)
// is replaced by its next request, and past max entries an arbitrary one
// is dropped (its response is then counted as provider "unknown").
type inflight struct {
	mu    sync.Mutex
	max   int
	calls map[string]modelRef
}

func newInflight(max int) *inflight {
	return &inflight{max: max, calls: make(map[string]modelRef)}
}

func (f *inflight) start(sessionID string, ref modelRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.calls[sessionID]; !ok && len(f.calls) >= f.max {
		for id := range f.calls {
			delete(f.calls, id)
			break
		}
	}
	f.calls[sessionID] = ref
}

// end forgets the session's call and returns what it was (ok false when
// unknown).
func (f *inflight) end(sessionID string) (modelRef, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ref, ok := f.calls[sessionID]
	delete(f.calls, sessionID)
	return ref, ok
}
