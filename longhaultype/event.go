package longhaultype

import (
	"encoding/json"
	"time"
)

// Event is one journal entry. Seq is per session, gap-free, and starts at 1.
// Data is the JSON of the payload type of Type (eventdata.go); DecodeData
// decodes it.
type Event struct {
	Seq       int64           `json:"seq"`
	Type      string          `json:"type"`
	Time      time.Time       `json:"time"`
	SessionID string          `json:"session_id"`
	TurnID    string          `json:"turn_id,omitempty"`
	Step      int             `json:"step,omitempty"`
	WorkerID  string          `json:"worker_id,omitempty"`
	Data      json.RawMessage `json:"data"`

	// payload is Data decoded, kept by the writer that encoded it, in
	// memory only (payload.go).
	payload any
}

// Event types. The list in API.md, plus a few that make the journal complete
// (a model call that failed, a cancel request, a turn cancelled). Each has
// its payload type in the registry of eventregistry.go (EventTypes).
const (
	EventSessionCreated         = "session.created"
	EventSessionStatusChanged   = "session.status_changed"
	EventSessionCancelRequested = "session.cancel_requested"
	EventTurnCreated            = "turn.created"
	EventTurnStarted            = "turn.started"
	EventTurnCompleted          = "turn.completed"
	EventTurnFailed             = "turn.failed"
	EventTurnCancelled          = "turn.cancelled"
	EventModelRequested         = "model.requested"
	EventModelResponded         = "model.responded"
	EventModelFailed            = "model.failed"
	EventModelDelta             = "model.delta"
	EventToolRequested          = "tool.requested"
	EventToolStarted            = "tool.started"
	EventToolCompleted          = "tool.completed"
	EventToolFailed             = "tool.failed"
	EventEffectInDoubt          = "effect.in_doubt"
	EventActionRequired         = "action.required"
	EventActionResolved         = "action.resolved"
	EventCheckpointCreated      = "checkpoint.created"
	EventArtifactCreated        = "artifact.created"
	EventContextCompacted       = "context.compacted"
	EventBudgetWarning          = "budget.warning"
	EventBudgetExceeded         = "budget.exceeded"
	EventBudgetUpdated          = "budget.updated"
	EventPolicyDecided          = "policy.decided"
	EventConstraintAdded        = "session.constraint_added"
	EventAcceptanceVerified     = "acceptance.verified"
	EventSubagentSpawned        = "subagent.spawned"
	EventSubagentCompleted      = "subagent.completed"
	// EventSubagentReported: a child told its parent its turn ended (the
	// child's side of subagent.completed).
	EventSubagentReported = "subagent.reported"
	// EventSubagentCancelRequested: the parent asked a child to stop (its
	// turn ended or was cancelled while the child ran).
	EventSubagentCancelRequested = "subagent.cancel_requested"
	EventSignalReceived          = "signal.received"
	EventSessionReviewed         = "session.reviewed"
	EventSessionForked           = "session.forked"
	EventNetworkConnection       = "network.connection"
	EventWaitStarted             = "wait.started"
	EventEnvironmentLost         = "environment.lost"
	EventEnvironmentRestored     = "environment.restored"
	// EventEnvironmentOpened: the session's environment opened on a
	// runner other than the one the journal names (the first time, or
	// after it moved): the session is pinned to it from then on.
	EventEnvironmentOpened = "environment.opened"
	// EventEnvironmentStopped: the environment of a session parked for
	// environment.idle_stop_seconds was stopped and freed, at a snapshot
	// of its workspace; the session is pinned to no runner from then on.
	EventEnvironmentStopped = "environment.stopped"
	// EventEnvironmentStopping: an idle stop took the snapshot of the
	// whole workspace it is about to stop the environment at. Journaled
	// before the stop, so that the snapshot is what the next copy is
	// restored from even if the stop's outcome never comes back (the
	// runner's connection broke after it removed the workspace).
	EventEnvironmentStopping = "environment.stopping"
	// EventEnvironmentStopFailed: an idle stop was refused (the runner is
	// away, a call was in flight...): the environment lives on, and the
	// stop is tried again later (the idle time, doubled for each refusal
	// in a row).
	EventEnvironmentStopFailed = "environment.stop_failed"
	// EventEnvironmentProvisioned: a stopped environment was made anew for
	// the call that needs it; environment.restored follows.
	EventEnvironmentProvisioned = "environment.provisioned"
	// EventMCPToolsListed: the tools an MCP server offered, as the model
	// sees them from then on (listed when first needed, at a turn's start
	// and after the server restarted; journaled when they changed).
	EventMCPToolsListed = "mcp.tools_listed"
	// EventMCPServerLost: an MCP server died or its connection broke
	// while a call to it ran.
	EventMCPServerLost = "mcp.server_lost"
	// EventSessionPauseRequested: a person asked a running session to
	// pause; it takes effect at the next safe point (session.paused).
	EventSessionPauseRequested = "session.pause_requested"
	// EventSessionPaused: the pause took effect; nothing runs until
	// session.resumed.
	EventSessionPaused = "session.paused"
	// EventSessionResumed: a person resumed a paused session (or withdrew
	// a pause that had not taken effect).
	EventSessionResumed = "session.resumed"
	// EventMonitorFinding: a built-in detector of the trajectory monitor
	// saw a pattern across the session's calls (refused connections,
	// probes for secrets, ...), naming the events that show it.
	EventMonitorFinding = "monitor.finding"
	// EventMonitorReviewed: the model monitor read the session tree's
	// trajectory and answered ok, warn or pause, with its reasons.
	EventMonitorReviewed = "monitor.reviewed"
	// EventMonitorHeld: the session's running sub-agents were paused with
	// it while a monitor action waits for a person.
	EventMonitorHeld = "monitor.held"
)

// BlobRef points at a content-addressed blob. Event payloads over 64 KiB are
// stored as blobs; the event's data is then {"blob": BlobRef, "preview": "..."}
// and the full data is at GET /v1/blobs/{sha256}.
type BlobRef struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// BlobData is the data of an event whose payload was moved to a blob.
type BlobData struct {
	Blob    BlobRef `json:"blob"`
	Preview string  `json:"preview"`
}

// Artifact is a versioned, content-addressed output of a session.
type Artifact struct {
	ID          string    `json:"id"`
	SessionID   string    `json:"session_id"`
	TurnID      string    `json:"turn_id"`
	Name        string    `json:"name"`
	Version     int       `json:"version"`
	SHA256      string    `json:"sha256"`
	Size        int64     `json:"size"`
	ContentType string    `json:"content_type"`
	Final       bool      `json:"final"`
	CreatedAt   time.Time `json:"created_at"`
}

// Checkpoint is a named, inspectable boundary in a session.
type Checkpoint struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	Step      int    `json:"step"`
	// Kind is "step" (taken after every step), "turn" (after every turn)
	// or "named" (the agent's checkpoint tool).
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Summary    string `json:"summary,omitempty"`
	NextAction string `json:"next_action,omitempty"`
	// EventSeq is the journal position the checkpoint stands for: a fork
	// from it starts with the journal up to and including this seq.
	EventSeq  int64    `json:"event_seq"`
	Artifacts []string `json:"artifacts"`
	// Snapshot is the content-addressed workspace snapshot (the sha256 of
	// its manifest); Files and Bytes describe it.
	Snapshot string `json:"snapshot,omitempty"`
	Files    int    `json:"files"`
	Bytes    int64  `json:"bytes"`
	// SnapshotError says why the workspace could not be snapshotted (e.g.
	// over the size limit); the checkpoint still marks the position.
	SnapshotError string    `json:"snapshot_error,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

// Checkpoint kinds.
const (
	CheckpointStep  = "step"
	CheckpointTurn  = "turn"
	CheckpointNamed = "named"
)

// EventTurnSteered: a person's message to the running turn (POST
// /v1/sessions/{id}/steer), given to the model at its next call.
const EventTurnSteered = "turn.steered"

// TreeEvent is one event of a session tree's stream (GET
// /v1/sessions/{id}/events/stream?include=subagents).
type TreeEvent struct {
	// Event is the event; its SessionID names the session of the tree
	// whose journal it is in.
	Event
	// Cursor resumes the stream right after this event (the text form of a
	// TreeCursor).
	Cursor string
}
