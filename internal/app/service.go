package app

import (
	"context"
	"io"
	"iter"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Service is every use case of the API. Method names and shapes follow the
// Go client's (client.Client), so the client, the library (Runtime) and
// the HTTP handlers name each operation alike; a test holds the three to
// the same method set (see the exceptions it lists, each with its reason).
//
// Errors a caller caused are *apierror.Error values; anything else is an
// internal failure (a 500 over HTTP).
type Service interface {
	// Sessions, turns and the controls a person or an application has
	// over them.

	// CreateSession creates a session and starts its first turn; with a
	// webhook_url, the answer carries the secret that signs its
	// notifications (shown only here).
	CreateSession(ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error)
	GetSession(ctx context.Context, id string) (*lt.Session, error)
	// GetSessionTree returns the session with its sub-agents nested,
	// recursively (a 400 naming include past MaxTreeSessions).
	GetSessionTree(ctx context.Context, id string) (*lt.Session, error)
	ListSessions(ctx context.Context, p lt.ListSessionsParams) (*lt.List[lt.Session], error)
	CreateTurn(ctx context.Context, sessionID string, req *lt.CreateTurnRequest) (*lt.Turn, error)
	ListTurns(ctx context.Context, sessionID string) (*lt.List[lt.Turn], error)
	GetTurn(ctx context.Context, sessionID, turnID string) (*lt.Turn, error)
	Cancel(ctx context.Context, sessionID string, req *lt.CancelRequest) (*lt.Session, error)
	SendSignal(ctx context.Context, sessionID string, req *lt.SignalRequest) (*lt.Signal, error)
	Fork(ctx context.Context, sessionID string, req *lt.ForkRequest) (*lt.Session, error)
	Review(ctx context.Context, sessionID string, req *lt.ReviewRequest) (*lt.Session, error)
	AddConstraint(ctx context.Context, sessionID, constraint string) (*lt.Session, error)
	UpdateBudget(ctx context.Context, sessionID string, p *lt.BudgetPatch) (*lt.Session, error)
	Steer(ctx context.Context, sessionID string, req *lt.SteerRequest) (*lt.Session, error)
	Pause(ctx context.Context, sessionID string, req *lt.PauseRequest) (*lt.Session, error)
	Resume(ctx context.Context, sessionID string) (*lt.Session, error)

	// The journal: a page of it, or followed as it grows.

	// ListEvents returns up to limit events with seq > after (limit 0:
	// DefaultListLimit); NextCursor is the last seq of a full page.
	ListEvents(ctx context.Context, sessionID string, after int64, limit int) (*lt.List[lt.Event], error)
	// StreamEvents yields the session's events with seq > after, in
	// order, then each new one as the journal grows, until ctx ends or the
	// engine stops (it then stops without an error) or reading fails (the
	// error is the last value). An error the request caused (an unknown
	// session: 404) is the only value, and comes before the stream opens:
	// a transport that answers with a status first learns when through
	// WithOpened.
	StreamEvents(ctx context.Context, sessionID string, after int64) iter.Seq2[lt.Event, error]
	// StreamTreeEvents follows the journals of a session and of all its
	// sub-agents, recursively, from the position cursor names (the text
	// form of an lt.TreeCursor, a plain seq of the session, its sub-agents
	// from their start, or "" for the start: ParseTreeStart), as
	// StreamEvents does;
	// each value's Cursor resumes the stream after it. A tree past
	// MaxTreeSessions at the start is a 400 naming include; one that grows
	// past it ends the stream with an error.
	StreamTreeEvents(ctx context.Context, sessionID, cursor string) iter.Seq2[lt.TreeEvent, error]

	// Required actions.

	ListActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error)
	// ListTreeActions is ListActions over the session and all its
	// sub-agents.
	ListTreeActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error)
	// ListAllActions is the inbox: actions across sessions in creation
	// order, filtered and paged by p.
	ListAllActions(ctx context.Context, p lt.ListActionsParams) (*lt.List[lt.Action], error)
	GetAction(ctx context.Context, actionID string) (*lt.Action, error)
	// DecideAction resolves a required action. Deciding again with the
	// same decision returns the first result; a different one is a 409.
	DecideAction(ctx context.Context, sessionID, actionID string, d *lt.Decision) (*lt.Action, error)

	// Provenance: traces, the effect ledger, checkpoints, artifacts, blobs.

	SessionTrace(ctx context.Context, id string, includeSubagents bool) (*lt.Trace, error)
	ListEffects(ctx context.Context, sessionID string) (*lt.List[lt.Effect], error)
	// GetEffect returns one ledger row with its whole arguments and output.
	GetEffect(ctx context.Context, sessionID, effectID string) (*lt.Effect, error)
	ListCheckpoints(ctx context.Context, sessionID string) (*lt.List[lt.Checkpoint], error)
	ListArtifacts(ctx context.Context, sessionID string) (*lt.List[lt.Artifact], error)
	GetArtifact(ctx context.Context, id string) (*lt.Artifact, error)
	// ArtifactContent returns an artifact's metadata and bytes (the
	// transports need its digest and content type).
	ArtifactContent(ctx context.Context, id string) (*lt.Artifact, []byte, error)
	GetBlob(ctx context.Context, sha256Hex string) ([]byte, error)

	// The workspace, as a person taking over sees it: the live one, or a
	// checkpoint's snapshot when checkpointID is set (read only).

	ListFiles(ctx context.Context, sessionID, checkpointID, dir string) (*lt.FileListing, error)
	// OpenFile opens a file for reading; the caller closes it.
	OpenFile(ctx context.Context, sessionID, checkpointID, path string) (*lt.FileEntry, io.ReadCloser, error)
	// PutFileIfMatch writes a person's upload (409 unless the session is
	// paused, idle, waiting or requires_action); actionID, when set, names
	// the input action of kind "file" it answers; ifMatch, when set, is an
	// If-Match value (the file's ETag, its quoted SHA-256, or a list of
	// them) and a 409 unless the file holds those bytes. (The client's and
	// the library's PutFileIfMatch take the bare SHA-256 and quote it.)
	PutFileIfMatch(ctx context.Context, sessionID, path string, data []byte, actionID, ifMatch string) (*lt.WorkspaceChange, error)
	// DeleteFileIfMatch deletes a file or a symlink (same rules).
	DeleteFileIfMatch(ctx context.Context, sessionID, path, ifMatch string) (*lt.WorkspaceChange, error)

	// Agents.

	PutAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, error)
	// EnsureAgent creates the agent, or adds a version only when req's
	// spec differs from the latest version's; it reports whether it wrote.
	EnsureAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, bool, error)
	// ListAgents lists the latest version of the agents of project (a
	// key of one project: its own; an admin: "" for every project).
	ListAgents(ctx context.Context, project string) (*lt.List[lt.Agent], error)
	// GetAgent returns a version (0: the latest) of the agent name of
	// project (a key of one project: its own; an admin: "" for the
	// default project).
	GetAgent(ctx context.Context, project, name string, version int) (*lt.Agent, error)
	// ListAgentVersions lists every version of the agent name of project
	// (GetAgent's project), the latest first.
	ListAgentVersions(ctx context.Context, project, name string) (*lt.List[lt.Agent], error)

	// The vault (never a secret's value). A secret belongs to one project
	// (req.Project; project: "" for the default project, or for every
	// project in a list), and only that project's sessions may use it.

	PutSecret(ctx context.Context, name string, req *lt.PutSecretRequest) (*lt.Secret, bool, error)
	ListSecrets(ctx context.Context, project string) (*lt.List[lt.Secret], error)
	DeleteSecret(ctx context.Context, project, name string) error

	// Identity.

	// Me says who the caller is and what its role may call (GET /v1/me),
	// for a client to offer only what the role allows; open to every
	// role.
	Me(ctx context.Context) (*lt.Identity, error)
	// Version says which build of Longhaul serves the API (GET
	// /v1/version): its module version and VCS revision; open to every
	// role but a runner.
	Version(ctx context.Context) (*lt.BuildInfo, error)

	// API keys (admin only). CreateKey's answer is the only place the
	// token appears; RevokeKey holds at once on every node (the key is
	// read from the store on each request).

	CreateKey(ctx context.Context, req *lt.CreateKeyRequest) (*lt.APIKey, error)
	ListKeys(ctx context.Context) (*lt.List[lt.APIKey], error)
	RevokeKey(ctx context.Context, id string) error

	// ListAudit returns a page of the audit log (state-changing and
	// refused requests), oldest first, filtered by p.
	ListAudit(ctx context.Context, p lt.ListAuditParams) (*lt.List[lt.AuditEntry], error)

	// Outgoing webhooks. An endpoint belongs to one project and hears of
	// that project's sessions only; project in a list as ListAgents'.

	CreateWebhookEndpoint(ctx context.Context, req *lt.CreateWebhookEndpointRequest) (*lt.WebhookEndpoint, error)
	ListWebhookEndpoints(ctx context.Context, project string) (*lt.List[lt.WebhookEndpoint], error)
	DeleteWebhookEndpoint(ctx context.Context, id string) error
	ListWebhookDeliveries(ctx context.Context, p lt.ListWebhookDeliveriesParams) (*lt.List[lt.WebhookDelivery], error)

	// ListRunners lists the runners (self-managed environments) connected
	// to any node, of project (ListAgents' project).
	ListRunners(ctx context.Context, project string) (*lt.List[lt.Runner], error)

	// Reports and health.

	TaskReport(ctx context.Context, p lt.TaskReportParams) (*lt.TaskReport, error)
	// Ready reports whether storage is reachable and migrated.
	Ready(ctx context.Context) error
}
