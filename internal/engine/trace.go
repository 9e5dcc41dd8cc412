package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/trace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// traceEventPage is how many events one read of a journal takes.
const traceEventPage = 1000

// SessionTrace derives the session's trace from its journal (404 for an
// unknown session). With includeSubagents, each sub-agent's own trace is
// nested under its subagent span, down to trace.DefaultMaxDepth levels.
func (e *Engine) SessionTrace(ctx context.Context, id string, includeSubagents bool) (*lt.Trace, error) {
	events, err := e.sessionEvents(ctx, id)
	if err != nil {
		return nil, err
	}
	var opts trace.Options
	if includeSubagents {
		opts.Subagents = func(childID string) ([]lt.Event, error) {
			evs, err := e.sessionEvents(ctx, childID)
			if errors.Is(err, store.ErrNotFound) {
				return nil, nil // nothing to nest: the span still says what it reported
			}
			return evs, err
		}
	}
	tr, err := trace.Build(events, &opts)
	if errors.Is(err, trace.ErrTooManySessions) {
		return nil, apierror.Invalid("include", "the session tree of %s has more than %d sessions, more than include=subagents nests in one trace; "+
			"read the sub-agents' traces one by one", id, trace.DefaultMaxSessions)
	}
	if err != nil {
		return nil, fmt.Errorf("trace of session %s: %w", id, err)
	}
	if tr.SessionID == "" {
		tr.SessionID = id
	}
	return tr, nil
}

// sessionEvents returns the session's whole journal in order, with every
// payload that was moved to a blob read back (a 404 for an unknown session,
// which also matches store.ErrNotFound).
func (e *Engine) sessionEvents(ctx context.Context, id string) ([]lt.Event, error) {
	row, err := e.store.SessionGet(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		nf := apierror.NotFound("session %s not found", id)
		nf.Cause = err
		return nil, nf
	}
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, err)
	}
	out := make([]lt.Event, 0, row.LastSeq)
	for after := int64(0); after < row.LastSeq; {
		evs, err := e.store.EventList(ctx, id, after, traceEventPage)
		if err != nil {
			return nil, fmt.Errorf("read journal of %s: %w", id, err)
		}
		if len(evs) == 0 {
			break
		}
		for _, r := range evs {
			ev, err := e.fullEvent(ctx, wireEvent(r))
			if err != nil {
				return nil, err
			}
			out = append(out, ev)
		}
		after = evs[len(evs)-1].Seq
	}
	return out, nil
}
