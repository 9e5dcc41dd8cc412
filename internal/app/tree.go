package app

import (
	"context"
	"errors"
	"iter"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TODO(issue 16, being built): the sub-agent tree and following journals
// move here from internal/server; these placeholders exist only on the
// integration branch and must not land.

var errNotMoved = errors.New("app: not moved here yet")

// GetSessionTree implements Service.
func (a *App) GetSessionTree(ctx context.Context, id string) (*lt.Session, error) {
	return nil, errNotMoved
}

// ListTreeActions implements Service.
func (a *App) ListTreeActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error) {
	return nil, errNotMoved
}

// StreamEvents implements Service.
func (a *App) StreamEvents(ctx context.Context, sessionID string, after int64) iter.Seq2[lt.Event, error] {
	return func(yield func(lt.Event, error) bool) { yield(lt.Event{}, errNotMoved) }
}

// StreamTreeEvents implements Service.
func (a *App) StreamTreeEvents(ctx context.Context, sessionID, cursor string) iter.Seq2[lt.TreeEvent, error] {
	return func(yield func(lt.TreeEvent, error) bool) { yield(lt.TreeEvent{}, errNotMoved) }
}
