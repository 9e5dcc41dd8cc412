package longhaul

import (
	"context"
	"fmt"
	"iter"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A session and its sub-agents, recursively: the in-process counterparts
// of the client's tree calls, with their signatures.

// GetSessionTree returns a session with its sub-agents, recursively: each
// session of the tree in Subagents of its parent, oldest first, each with
// its pending required actions. A tree of more than 1,000 sessions is
// refused (a *client.APIError naming the field include).
func (rt *Runtime) GetSessionTree(ctx context.Context, id string) (*lt.Session, error) {
	if err := requireID("id", id); err != nil {
		return nil, fmt.Errorf("get session tree: %w", err)
	}
	s, err := rt.svc.GetSessionTree(asLibrary(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("get session tree %s: %w", id, apiError(err))
	}
	return s, nil
}

// ListTreeActions returns the required actions of a session and of all its
// sub-agents, recursively, ordered by creation time, only those with status
// when it is not empty. Each action's SessionID names the session to
// decide it on.
func (rt *Runtime) ListTreeActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list tree actions: %w", err)
	}
	l, err := rt.svc.ListTreeActions(asLibrary(ctx), sessionID, status)
	if err != nil {
		return nil, fmt.Errorf("list actions of tree %s: %w", sessionID, apiError(err))
	}
	return l, nil
}

// StreamTreeEvents follows the journals of a session and of all its
// sub-agents, recursively, merged into one stream: each session's events
// in seq order, each once; events of different sessions interleave as they
// happen, and a sub-agent spawned at any moment is followed from its first
// event.
//
// cursor says where to start: "" for the start of every journal, an event
// seq of the session (its sub-agents from their start), or the Cursor of
// the last lt.TreeEvent handled, to resume exactly after it. As
// StreamEvents, it never ends on its own; the error is non-nil only once,
// as the last value: ctx's error, or a failure (an unknown session, a
// malformed cursor, a tree larger than is served).
func (rt *Runtime) StreamTreeEvents(ctx context.Context, sessionID, cursor string) iter.Seq2[lt.TreeEvent, error] {
	return func(yield func(lt.TreeEvent, error) bool) {
		if err := requireID("sessionID", sessionID); err != nil {
			yield(lt.TreeEvent{}, fmt.Errorf("stream events of tree: %w", err))
			return
		}
		follow(ctx, rt.svc.StreamTreeEvents(asLibrary(ctx), sessionID, cursor), yield, func(err error) error {
			return fmt.Errorf("stream events of tree %s: %w", sessionID, err)
		})
	}
}
