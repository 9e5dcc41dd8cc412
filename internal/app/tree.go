package app

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Journals is what the sub-agent trees and the followed journals read:
// sessions, their actions and journals, the notice that a journal grew,
// and the engine's walk of a tree. *engine.Engine implements it; a test
// may serve an in-memory tree instead.
type Journals interface {
	GetSession(ctx context.Context, id string) (*lt.Session, error)
	ListActions(ctx context.Context, sessionID, status string) ([]lt.Action, error)
	// ListEvents returns up to limit events with seq > after (404 for an
	// unknown session).
	ListEvents(ctx context.Context, sessionID string, after int64, limit int) ([]lt.Event, error)
	// WatchSession returns a channel that receives the session's last seq
	// whenever its journal grows (a hint: re-read with ListEvents), until
	// stop is called or ctx ends.
	WatchSession(ctx context.Context, sessionID string) (updates <-chan int64, stop func())
	// SessionTree lists the sessions below root as store.WalkTree does,
	// at most engine.MaxTreeSessions with the root (past it:
	// store.ErrTreeTooLarge).
	SessionTree(ctx context.Context, root string) ([]store.TreeMember, error)
	// SessionChildren lists a session's children oldest first, as
	// store.Children does (past room: store.ErrTreeTooLarge).
	SessionChildren(ctx context.Context, id string, room int) ([]string, error)
}

var _ Journals = (*engine.Engine)(nil)

// MaxTreeSessions bounds the sessions of a tree that GetSessionTree,
// ListTreeActions and StreamTreeEvents serve, the root included (the
// engine's bound on every walk of a tree).
const MaxTreeSessions = engine.MaxTreeSessions

// DefaultPollInterval is how often a followed journal is read again when
// no notice of its growth came (a notice may be lost: store notifications
// are hints).
const DefaultPollInterval = 15 * time.Second

// Trees serves the use cases that read a session with its sub-agents, or
// follow journals: GetSessionTree, ListTreeActions, StreamEvents and
// StreamTreeEvents. App serves them through a Trees over its engine.
type Trees struct {
	src Journals
	// newPoll makes the ticker on which a stream reads its journals again.
	newPoll func() (tick <-chan time.Time, stop func())
	// feeds are the followed sessions' watches and latest events, shared
	// by their streams (streamtail.go).
	feeds feeds
}

// NewTrees returns a Trees reading src. poll, when not nil, makes the
// ticker on which each stream reads its journals again in case a notice
// was lost (a test sends ticks on demand); nil: every
// DefaultPollInterval.
func NewTrees(src Journals, poll func() (tick <-chan time.Time, stop func())) *Trees {
	if poll == nil {
		poll = every(DefaultPollInterval)
	}
	return &Trees{src: src, newPoll: poll}
}

// every makes tickers of period d.
func every(d time.Duration) func() (<-chan time.Time, func()) {
	return func() (<-chan time.Time, func()) {
		t := time.NewTicker(d)
		return t.C, t.Stop
	}
}

// GetSessionTree implements Service.
func (a *App) GetSessionTree(ctx context.Context, id string) (*lt.Session, error) {
	if err := Allow(ctx, "GetSessionTree"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, id); err != nil {
		return nil, err
	}
	return a.trees.GetSessionTree(ctx, id)
}

// ListTreeActions implements Service.
func (a *App) ListTreeActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error) {
	if err := Allow(ctx, "ListTreeActions"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.trees.ListTreeActions(ctx, sessionID, status)
}

// StreamEvents implements Service.
func (a *App) StreamEvents(ctx context.Context, sessionID string, after int64) iter.Seq2[lt.Event, error] {
	if err := Allow(ctx, "StreamEvents"); err != nil {
		return refused[lt.Event](err)
	}
	return visibleStream(ctx, a, sessionID, a.trees.StreamEvents(ctx, sessionID, after))
}

// StreamTreeEvents implements Service.
func (a *App) StreamTreeEvents(ctx context.Context, sessionID, cursor string) iter.Seq2[lt.TreeEvent, error] {
	if err := Allow(ctx, "StreamTreeEvents"); err != nil {
		return refused[lt.TreeEvent](err)
	}
	return visibleStream(ctx, a, sessionID, a.trees.StreamTreeEvents(ctx, sessionID, cursor))
}

// GetSessionTree returns the session with its sub-agents filled in, each
// with its own, down the whole tree, oldest child first. Every session of
// the tree is read with GetSession, so each carries its pending
// required_actions. An unknown session is a 404; a tree of more than
// engine.MaxTreeSessions sessions a 400 naming include.
func (t *Trees) GetSessionTree(ctx context.Context, id string) (*lt.Session, error) {
	root, err := t.src.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	members, err := t.tree(ctx, id)
	if err != nil {
		return nil, err
	}
	full := make(map[string]*lt.Session, len(members)+1)
	children := make(map[string][]string, len(members)+1)
	full[root.ID] = root
	for _, m := range members {
		sess, err := t.src.GetSession(ctx, m.ID)
		if err != nil {
			return nil, fmt.Errorf("get sub-agent %s of %s: %w", m.ID, m.ParentID, err)
		}
		full[m.ID] = sess
		children[m.ParentID] = append(children[m.ParentID], m.ID)
	}
	// Subagents holds values, so a parent takes copies of its children:
	// build each child completely before copying it. The walk never
	// repeats a session, so this ends.
	var build func(id string) lt.Session
	build = func(id string) lt.Session {
		sess := full[id]
		for _, c := range children[id] {
			sess.Subagents = append(sess.Subagents, build(c))
		}
		return *sess
	}
	*root = build(root.ID)
	return root, nil
}

// ListTreeActions returns the required actions of the session and of every
// session below it (each action names its session_id, where it is
// decided), by created_at; all of them when status is empty.
func (t *Trees) ListTreeActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error) {
	// The root first: an unknown session is a 404 before any walk.
	actions, err := t.src.ListActions(ctx, sessionID, string(status))
	if err != nil {
		return nil, err
	}
	members, err := t.tree(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		more, err := t.src.ListActions(ctx, m.ID, string(status))
		if err != nil {
			return nil, fmt.Errorf("list actions of sub-agent %s: %w", m.ID, err)
		}
		actions = append(actions, more...)
	}
	// Stable: actions created at the same instant keep the tree's order
	// (the root's first) and each session's own order.
	slices.SortStableFunc(actions, func(a, b lt.Action) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return list(actions), nil
}

// tree lists the sessions below root, turning a tree past the bound into
// the error the caller sees.
func (t *Trees) tree(ctx context.Context, root string) ([]store.TreeMember, error) {
	members, err := t.src.SessionTree(ctx, root)
	if errors.Is(err, store.ErrTreeTooLarge) {
		return nil, treeTooLarge(root)
	}
	return members, err
}

// treeTooLarge is the error for a tree past engine.MaxTreeSessions: refused
// rather than cut, since a client must not take a partial tree for the
// whole one.
func treeTooLarge(root string) error {
	return apierror.Invalid("include", "the session tree of %s has more than %d sessions, more than include=subagents serves; "+
		"read its sessions one by one (GET /v1/sessions?parent_id=)", root, engine.MaxTreeSessions)
}

// quoteValue quotes a value a caller gave for an error message, cut to a
// readable length (as the HTTP layer quotes query values).
func quoteValue(v string) string {
	const maxLen = 64
	if len(v) > maxLen {
		v = v[:maxLen] + "…"
	}
	return strconv.Quote(strings.ToValidUTF8(v, "\uFFFD"))
}
