package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A worker that claims a session rebuilds what the runner derives from the
// journal: the model context (transcript.go), the MCP servers' tools as
// last listed, and the node that last changed the workspace. Everything
// else it needs (the turn, the step and its calls, the open effects and
// pending actions, budgets, the tree's share) is the stored projection,
// read in one row (loadState).
//
// Replaying the journal from its first event made a claim cost O(journal):
// the last parks of a 10,000-step session took 40 times the first ones.
// So every compaction also stores a snapshot of that derived state, as it
// stands once the compaction event is applied, in a blob named by the
// event (context.compacted's snapshot), and the projection keeps the latest
// one (journal.State.ContextSnapshot). A claim starts from it and replays
// only the events after it: O(steps since the last compaction). The
// journal stays the truth: the snapshot is derived from it alone, and a
// claim falls back to the whole journal when there is none, or the one
// named does not fit the session (another format, a fork's copy of its
// parent's events, a seq that moved).
//
// A trajectory policy (count(effects, ...)) looks at every effect of the
// session with its arguments, which the effects table does not keep (only
// their hash). So a runner with such a policy also puts its effect history
// (policy.go) in the snapshot, and a claim starts it from there too; a
// snapshot without one (written while no policy needed it) is not used by
// such a runner: it replays the journal.

// contextSnapshotVersion is the snapshot format: a snapshot of another one
// is not read (the journal is).
const contextSnapshotVersion = 1

// contextSnapshot is what the runner derives from the journal up to event
// Seq of session SessionID.
type contextSnapshot struct {
	Version    int                `json:"version"`
	SessionID  string             `json:"session_id"`
	Seq        int64              `json:"seq"`
	Transcript transcriptSnapshot `json:"transcript"`
	// MCP is each server's latest listing.
	MCP             map[string]*lt.MCPToolsListedData `json:"mcp,omitempty"`
	WorkspaceWriter string                            `json:"workspace_writer,omitempty"`
	// History is the effect history trajectory policies read; nil when
	// the runner kept none (no policy of the agent reads effects).
	History *historySnapshot `json:"history,omitempty"`
	// Monitor is the trajectory monitor's state (nil in a snapshot from
	// before it: the detectors start afresh from the snapshot on).
	Monitor json.RawMessage `json:"monitor,omitempty"`
}

// transcriptSnapshot is a transcript without the items its summary stands
// for, and without the steering messages already placed among the items.
type transcriptSnapshot struct {
	Goal        string                             `json:"goal,omitempty"`
	Constraints []string                           `json:"constraints,omitempty"`
	Criteria    []string                           `json:"criteria,omitempty"`
	Inputs      map[string]string                  `json:"inputs,omitempty"`
	Base        int                                `json:"base"`
	Items       []model.Message                    `json:"items,omitempty"`
	Edited      map[string]string                  `json:"edited,omitempty"`
	Summary     string                             `json:"summary,omitempty"`
	Cut         int                                `json:"cut"`
	Note        string                             `json:"note,omitempty"`
	Changed     []lt.WorkspaceChange               `json:"changed,omitempty"`
	NotApplied  []lt.WorkspaceChangeNotAppliedData `json:"not_applied,omitempty"`
	Steers      []string                           `json:"steers,omitempty"`
	SteerBase   int                                `json:"steer_base"`
	Placed      int                                `json:"placed"`
	Sent        int                                `json:"sent"`
	Early       []earlySteerSnapshot               `json:"early,omitempty"`
}

type earlySteerSnapshot struct {
	TurnID string `json:"turn_id"`
	Input  string `json:"input"`
}

// snapshotAt returns the transcript as it will be once a compaction
// summarising the first cut items into summary is applied.
func (t *transcript) snapshotAt(cut int, summary string) transcriptSnapshot {
	s := transcriptSnapshot{
		Goal: t.goal, Constraints: t.constraints, Criteria: t.criteria, Inputs: t.inputs,
		Base: cut, Items: t.from(cut), Edited: t.edited, Summary: summary, Cut: cut,
		Note: t.note, Changed: t.changed, NotApplied: t.notApplied,
		Steers: t.steers[t.placed-t.steerBase:], SteerBase: t.placed, Placed: t.placed, Sent: t.sent,
	}
	for _, e := range t.early {
		s.Early = append(s.Early, earlySteerSnapshot{TurnID: e.turnID, Input: e.input})
	}
	return s
}

// restore sets the transcript's derived state from a snapshot (what the
// spec says, the instructions, stays).
func (t *transcript) restore(s *transcriptSnapshot) {
	t.goal, t.constraints, t.criteria = s.Goal, s.Constraints, s.Criteria
	t.inputs, t.edited = s.Inputs, s.Edited
	if t.inputs == nil {
		t.inputs = make(map[string]string)
	}
	if t.edited == nil {
		t.edited = make(map[string]string)
	}
	t.base, t.msgs, t.summary, t.cut = s.Base, s.Items, s.Summary, s.Cut
	t.note, t.changed, t.notApplied = s.Note, s.Changed, s.NotApplied
	t.steers, t.steerBase, t.placed, t.sent = s.Steers, s.SteerBase, s.Placed, s.Sent
	t.early = nil
	for _, e := range s.Early {
		t.early = append(t.early, earlySteer{turnID: e.TurnID, input: e.Input})
	}
}

// contextSnapshotFor encodes the snapshot a compaction event summarising
// the first cut items into summary names. It is the runner's state once
// the event is applied; the event is the next one of the session. ok is
// false when the runner cannot vouch for it (snapshotOff).
func (r *runner) contextSnapshotFor(ctx context.Context, cut int, summary string) (data []byte, ok bool, err error) {
	if r.snapshotOff {
		return nil, false, nil
	}
	snap := contextSnapshot{
		Version: contextSnapshotVersion, SessionID: r.st.Session.ID, Seq: r.st.Session.LastEventSeq + 1,
		Transcript: r.tx.snapshotAt(cut, summary), MCP: r.mcp.listed, WorkspaceWriter: r.wsWriter,
	}
	if r.h != nil {
		if snap.History, err = r.h.snapshot(); err != nil {
			return nil, false, err
		}
	}
	if snap.Monitor, err = r.mon.State(); err != nil {
		return nil, false, err
	}
	data, err = json.Marshal(&snap)
	if err != nil {
		return nil, false, fmt.Errorf("encode the context snapshot: %w", err)
	}
	// The summary is the model's answer, redacted as the event will be
	// (batch.add): the snapshot holds what a replay would. (The rest, the
	// history's arguments included, comes from events redacted already.)
	red, err := r.e.redactor(ctx)
	if err != nil {
		return nil, false, err
	}
	if red != nil && !red.Empty() {
		data = red.JSON(data)
	}
	return data, true, nil
}

// readContextSnapshot returns the session's latest context snapshot, or
// nil when there is none that fits it (the caller replays the journal).
func (e *Engine) readContextSnapshot(ctx context.Context, sessionID string, last int64, ref *journal.ContextSnapshot) (*contextSnapshot, error) {
	if ref == nil || ref.Seq > last {
		return nil, nil
	}
	data, err := e.store.BlobGet(ctx, ref.SHA256)
	if errors.Is(err, store.ErrNotFound) {
		e.log.Warn("context snapshot missing: replaying the journal", "session", sessionID, "seq", ref.Seq)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the context snapshot of event %d: %w", ref.Seq, err)
	}
	var snap contextSnapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		e.log.Warn("context snapshot unreadable: replaying the journal", "session", sessionID, "seq", ref.Seq, "err", err)
		return nil, nil
	}
	if snap.Version != contextSnapshotVersion || snap.SessionID != sessionID || snap.Seq != ref.Seq {
		return nil, nil // a fork's copy of its parent's, or another format
	}
	return &snap, nil
}

// rebuild derives the runner's state from the journal up to seq last: from
// the latest context snapshot and the events after it, or from the first
// event when there is no snapshot to start from (or, for a runner that
// keeps an effect history, none that holds one).
func (r *runner) rebuild(ctx context.Context, last int64) error {
	return r.rebuildFrom(ctx, last, nil)
}

// rebuildFrom is rebuild with known, when not empty, the session's events
// from the first to last, which are not read again (a session created
// here: what its creation stored).
func (r *runner) rebuildFrom(ctx context.Context, last int64, known []store.Event) error {
	after := int64(0)
	snap, err := r.e.readContextSnapshot(ctx, r.st.Session.ID, last, r.st.ContextSnapshot)
	if err != nil {
		return err
	}
	var h *history
	if snap != nil && r.h != nil {
		if h = r.e.snapshotHistoryOf(snap); h == nil {
			snap = nil
		}
	}
	if snap != nil {
		r.tx.restore(&snap.Transcript)
		if len(snap.MCP) > 0 {
			r.mcp.listed = snap.MCP
			r.tools.withMCP(r.mcp)
		}
		r.wsWriter = snap.WorkspaceWriter
		if h != nil {
			r.h = h
		}
		if len(snap.Monitor) > 0 {
			if err := r.mon.Restore(snap.Monitor); err != nil {
				r.e.log.Warn("context snapshot's monitor state unreadable: the detectors start afresh", "session", snap.SessionID, "seq", snap.Seq, "err", err)
			}
		}
		after = snap.Seq
	}
	for after < last {
		evs := known
		known = nil
		if len(evs) == 0 || evs[0].Seq != after+1 || evs[len(evs)-1].Seq != last {
			var err error
			if evs, err = r.e.store.EventList(ctx, r.lease.SessionID, after, int(min(1000, last-after))); err != nil {
				return err
			}
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			w, err := r.e.resolveBlob(ctx, wireEvent(ev), r.h != nil)
			if err != nil {
				return err
			}
			r.observe(w)
		}
		after = evs[len(evs)-1].Seq
	}
	return nil
}

// snapshotHistoryOf returns the effect history snap holds, or nil when it
// holds none, or one that does not decode (the journal is replayed).
func (e *Engine) snapshotHistoryOf(snap *contextSnapshot) *history {
	h, err := snap.History.restore(snap.SessionID)
	if err != nil {
		e.log.Warn("context snapshot's effect history unreadable: replaying the journal", "session", snap.SessionID, "seq", snap.Seq, "err", err)
		return nil
	}
	return h
}

// rederive derives the runner's state again from the journal up to last
// (from its latest snapshot on), then from its unsaved events: merge calls
// it when another writer's events came in after the runner had read its
// own, so that what it derives follows the journal's order, as a resumed
// worker's does. The runner's own bookkeeping of its MCP connections stays.
func (r *runner) rederive(ctx context.Context, last int64) error {
	r.tx = newTranscript(&r.spec)
	r.mcp.listed = map[string]*lt.MCPToolsListedData{}
	r.tools.withMCP(r.mcp)
	r.wsWriter = ""
	if r.h != nil {
		r.h = newHistory()
	}
	r.mon.Reset()
	r.monFound = nil
	if err := r.rebuild(ctx, last); err != nil {
		return err
	}
	for _, ev := range r.b.events {
		r.observe(ev)
	}
	return nil
}

// mcpListingsOf returns the latest listing of each MCP server in session
// id's journal: from its latest context snapshot on, not from its first
// event.
func (e *Engine) mcpListingsOf(ctx context.Context, id string) (map[string]*lt.MCPToolsListedData, error) {
	row, st, err := e.loadState(ctx, id)
	if err != nil {
		return nil, err
	}
	listed := map[string]*lt.MCPToolsListedData{}
	after := int64(0)
	snap, err := e.readContextSnapshot(ctx, id, row.LastSeq, st.ContextSnapshot)
	if err != nil {
		return nil, err
	}
	if snap != nil {
		maps.Copy(listed, snap.MCP)
		after = snap.Seq
	}
	for after < row.LastSeq {
		evs, err := e.store.EventList(ctx, id, after, int(min(1000, row.LastSeq-after)))
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if ev.Type != lt.EventMCPToolsListed {
				continue
			}
			w, err := e.resolveBlob(ctx, wireEvent(ev), false)
			if err != nil {
				return nil, err
			}
			var d lt.MCPToolsListedData
			if err := json.Unmarshal(w.Data, &d); err != nil {
				return nil, fmt.Errorf("decode the MCP listing of event %d: %w", ev.Seq, err)
			}
			listed[d.Server] = &d
		}
		after = evs[len(evs)-1].Seq
	}
	return listed, nil
}

// withoutSnapshot returns a context.compacted's data without its snapshot,
// and the snapshot's digest ("": it named none). The event is applied again
// at another seq (merge), after events the snapshot does not hold.
func withoutSnapshot(data json.RawMessage) (json.RawMessage, string) {
	var d lt.ContextCompactedData
	if json.Unmarshal(data, &d) != nil || d.Snapshot == nil {
		return data, ""
	}
	sha := d.Snapshot.SHA256
	d.Snapshot = nil
	out, err := json.Marshal(d)
	if err != nil {
		return data, ""
	}
	return out, sha
}
