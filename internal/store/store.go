package store

import (
	"context"
	"encoding/json"
	"errors"
	"syscall"
	"time"
)

// Sentinel errors. Drivers return them (possibly wrapped); callers match them
// with errors.Is.
var (
	// ErrNotFound: no row with that key.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the session's journal moved past ExpectedSeq, or a unique
	// key already exists. Re-read and retry.
	ErrConflict = errors.New("conflict")
	// ErrParentMoved comes with ErrConflict when a creation's ParentAt
	// does not hold (SessionCreateParams.ParentAt).
	ErrParentMoved = errors.New("the parent's journal moved")
	// ErrLeaseLost: the writer's lease (owner, epoch) is no longer the
	// session's lease (or, for WebhookRecordAttempt, its claim is no longer
	// the delivery's claim). The writer must stop without writing anything.
	ErrLeaseLost = errors.New("lease lost")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrStorageFull: the volume holding the data is full (SQLite's
	// SQLITE_FULL, PostgreSQL's disk_full, ENOSPC on a file). Nothing of the
	// failed write was kept; the same write can succeed once space is freed.
	ErrStorageFull = errors.New("storage full")
	// ErrUnavailable: the database could not be reached, or dropped the
	// connection (a restart, a failover, a network cut). Whether a write
	// in flight was committed is unknown: read before writing again.
	ErrUnavailable = errors.New("storage unavailable")
)

// IsStorageFull reports whether err says the storage is full: the driver's
// sentinel, or an out-of-space or over-quota error from the file system
// (blobs, workspace snapshots and their lists are files).
func IsStorageFull(err error) bool {
	return errors.Is(err, ErrStorageFull) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// Store is a storage driver. All methods are safe for concurrent use.
type Store interface {
	// Migrate applies the driver's embedded migrations in order. It refuses
	// (with an error naming both versions) a schema newer than the driver.
	Migrate(ctx context.Context) error
	// Ping checks that the storage is reachable and migrated (readiness).
	Ping(ctx context.Context) error
	// Close releases the driver's resources; pending appends finish first.
	Close() error

	AgentInsert(ctx context.Context, p *AgentInsertParams) (*AgentRow, error)
	// AgentGet returns a version of the agent name of project (version 0:
	// the latest), or ErrNotFound.
	AgentGet(ctx context.Context, project, name string, version int) (*AgentRow, error)
	// AgentVersions returns every version of the agent name of project,
	// newest first (none: an empty list).
	AgentVersions(ctx context.Context, project, name string) ([]*AgentRow, error)
	// AgentList returns the latest version of each agent of project ("":
	// of every project), by project and name.
	AgentList(ctx context.Context, project string) ([]*AgentRow, error)

	// SessionCreate inserts a session row and appends its first events in one
	// transaction. ErrConflict if the id exists.
	SessionCreate(ctx context.Context, p *SessionCreateParams) ([]Event, error)
	SessionGet(ctx context.Context, id string) (*SessionRow, error)
	// SessionProject returns the project of a session, reading nothing
	// else of it (every request of a key confined to a project asks it
	// first); ErrNotFound if there is no such session.
	SessionProject(ctx context.Context, id string) (string, error)
	// SessionLastSeq returns the seq of a session's last event, reading
	// nothing else of it: a runner asks it at every safe point to learn
	// whether another writer appended since it last read the session, and
	// reads the rest only then. It sees every append acknowledged (its
	// EventAppend or SessionCreate returned) before it was called.
	// ErrNotFound if there is no such session.
	SessionLastSeq(ctx context.Context, id string) (int64, error)
	SessionList(ctx context.Context, p *SessionListParams) ([]*SessionRow, error)
	// SessionCountByStatus counts the sessions of each status (statuses
	// without sessions are absent), for metrics scraped every few seconds:
	// it reads an index, never a session's state.
	SessionCountByStatus(ctx context.Context) (map[string]int64, error)

	// EventAppend appends events and writes projections atomically; see the
	// package comment. On success it returns the stored events with their
	// seqs, and the driver publishes a notification after the commit.
	EventAppend(ctx context.Context, p *EventAppendParams) ([]Event, error)
	// EventList returns up to limit events of a session with seq > afterSeq,
	// in seq order.
	EventList(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]Event, error)

	TurnList(ctx context.Context, sessionID string) ([]*DocRow, error)
	TurnGet(ctx context.Context, sessionID, turnID string) (*DocRow, error)
	ActionList(ctx context.Context, sessionID string, status string) ([]*DocRow, error) // status "": all
	ActionGet(ctx context.Context, sessionID, actionID string) (*DocRow, error)
	// ActionListAll lists required actions across sessions (the inbox) in
	// creation order (created_at, then id), filtered by the non-empty fields
	// of p. An unknown SessionID lists nothing, without error.
	ActionListAll(ctx context.Context, p *ActionListParams) ([]*DocRow, error)
	// ActionGetByID returns an action by its id alone (action ids are
	// global); ErrNotFound for an unknown id.
	ActionGetByID(ctx context.Context, actionID string) (*DocRow, error)
	// ActionPendingStats counts the pending required actions by the action
	// document's type, with the creation time of the oldest of each type,
	// ordered by type (types without pending actions are absent).
	ActionPendingStats(ctx context.Context) ([]ActionTypeStats, error)
	EffectList(ctx context.Context, sessionID string) ([]*DocRow, error)
	ArtifactList(ctx context.Context, sessionID string) ([]*DocRow, error)
	ArtifactGet(ctx context.Context, artifactID string) (*DocRow, error)
	CheckpointList(ctx context.Context, sessionID string) ([]*DocRow, error)

	// BlobPut stores content-addressed bytes (idempotent). BlobGet returns
	// ErrNotFound for an unknown digest.
	BlobPut(ctx context.Context, sha256Hex string, data []byte) error
	// BlobPutMany stores several blobs (digest to bytes, each digest the
	// lowercase hex SHA-256 of its bytes) in one transaction: all or none
	// are stored once it returns. It spares a writer of many blobs (a
	// workspace's first snapshot) a commit per blob.
	BlobPutMany(ctx context.Context, blobs map[string][]byte) error
	BlobGet(ctx context.Context, sha256Hex string) ([]byte, error)
	// BlobHas reports whether a blob is stored, without reading it, so a
	// writer of many blobs (workspace snapshots) sends only the new ones.
	BlobHas(ctx context.Context, sha256Hex string) (bool, error)
	// BlobInProject reports whether a session of project refers to the
	// blob: wrote it in SessionCreate or EventAppend (Blobs), which records
	// the reference. A blob stored only with BlobPut (a snapshot's) is in
	// no project.
	BlobInProject(ctx context.Context, sha256Hex, project string) (bool, error)
	// BlobOwn records that project owns the snapshot blobs digests (it got
	// their bytes legitimately), each for itself alone, whatever its bytes
	// look like, in transactions of a few thousand. Recording one again is
	// a no-op. The blobs need not be stored.
	BlobOwn(ctx context.Context, project string, digests []string) error
	// BlobOwnTrees records that project owns the trees digests and what
	// each reaches: snapshot.Claim calls it, in order, once it read each
	// tree and recorded every blob it reaches, so that a tree's row stands
	// for them. A blob owned for itself becomes owned as a tree.
	BlobOwnTrees(ctx context.Context, project string, digests []string) error
	// BlobsOwned returns which of digests project owns (BlobOwn or
	// BlobOwnTrees), in as few reads as it can: a runner asks about a
	// batch of blobs at once.
	BlobsOwned(ctx context.Context, project string, digests []string) (map[string]bool, error)
	// BlobOwnership returns the digests of digests project owns, each
	// with true when owned as a tree (BlobOwnTrees), false when for
	// itself: the one read snapshot.Claim makes per level of trees.
	BlobOwnership(ctx context.Context, project string, digests []string) (map[string]bool, error)

	// LeaseClaim claims up to Limit sessions that are runnable (Runnable set, or
	// WakeAt reached) and not leased by a live worker (no owner, or the lease
	// expired at Now), oldest wake first. Each claim bumps the session's epoch.
	LeaseClaim(ctx context.Context, p *LeaseClaimParams) ([]Lease, error)
	// LeaseRenew extends a lease; ErrLeaseLost if (owner, epoch) no longer hold it.
	LeaseRenew(ctx context.Context, l Lease, expiresAt time.Time) error
	// LeaseRelease gives a lease up without writing events (the session stays
	// as it is; it is claimable again at once if runnable).
	LeaseRelease(ctx context.Context, l Lease) error
	// LeaseHandOver is LeaseRelease for a session that only node can run
	// now (the runner it needs is connected there): until until, only a
	// claim whose Owner is node takes it; after, any claim does. A claim
	// clears the hand-over.
	LeaseHandOver(ctx context.Context, l Lease, node string, until time.Time) error
	// LeaseExpireOwner expires, as of now, every lease held by owner. A node
	// calls it at start-up for the leases of its previous incarnation (which
	// is dead: its node id is its own), so its sessions resume at once rather
	// than after the lease TTL. Epochs are untouched: the next claim bumps
	// them, which fences any straggler. Returns how many leases it expired.
	LeaseExpireOwner(ctx context.Context, owner string, now time.Time) (int, error)

	// IdempotencyGet returns the stored response for (scope, key), or
	// ErrNotFound. IdempotencyPut stores it and drops the key's claim, in
	// one transaction; ErrConflict if a response is stored already.
	IdempotencyGet(ctx context.Context, scope, key string) (*IdempotencyRow, error)
	IdempotencyPut(ctx context.Context, row *IdempotencyRow) error
	// IdempotencyClaim holds (c.Scope, c.Key) for a request about to run,
	// so that no other node runs it at the same time, or answers why not:
	// the key's stored response, or another run's claim (live, or with
	// another body). A claim whose run ended without a response (its node
	// died, or it released it) is taken over by a request with the same
	// body once it expires, keeping its Seed (IdempotencyClaim).
	IdempotencyClaim(ctx context.Context, c *IdempotencyClaim, now time.Time) (*IdempotencyClaimResult, error)
	// IdempotencyRenew moves the expiry of the claim token holds to
	// expiresAt; ErrNotFound if token no longer holds it.
	IdempotencyRenew(ctx context.Context, scope, key, token string, expiresAt time.Time) error
	// IdempotencyRelease ends the claim token holds without a response:
	// drop removes it (the run wrote nothing, so a retry may run anew,
	// with another body too); otherwise it expires as of now, and a retry
	// with the same body runs again with its Seed. Releasing a claim
	// token no longer holds is not an error.
	IdempotencyRelease(ctx context.Context, scope, key, token string, drop bool, now time.Time) error
	// IdempotencyExpireOwner expires, as of now, every claim owner holds:
	// a node calls it at start-up for its previous incarnation's, whose
	// requests died with it (LeaseExpireOwner). Returns how many.
	IdempotencyExpireOwner(ctx context.Context, owner string, now time.Time) (int, error)
	// IdempotencyPrune deletes the records created before before and the
	// claims that lapsed before it (a run that died, whose client never
	// retried), a batch per transaction so that other writes go on
	// meanwhile, and returns how many rows it deleted. A live claim is
	// never deleted: its run renews it. Pruning the same period on two
	// nodes at once deletes each row once and is no error.
	IdempotencyPrune(ctx context.Context, before time.Time) (int64, error)

	// SecretPut creates the vault secret row.Name of row.Project, or replaces it (a
	// replacement keeps the stored CreatedAt), and reports whether it created
	// it. The store holds only what the vault gives it: ciphertext, never a
	// value. Subscribers hear KindSecrets after the commit.
	SecretPut(ctx context.Context, row *SecretRow) (created bool, err error)
	// SecretGet returns the secret name of project, or ErrNotFound.
	SecretGet(ctx context.Context, project, name string) (*SecretRow, error)
	// SecretList returns every secret of project ("": of every project),
	// by project and name.
	SecretList(ctx context.Context, project string) ([]*SecretRow, error)
	// SecretDelete removes the secret name of project (ErrNotFound if
	// there is none); subscribers hear KindSecrets after the commit.
	SecretDelete(ctx context.Context, project, name string) error

	// APIKeyCreate stores a new API key; ErrConflict if its id or its
	// token hash is taken. The store holds only the token's hash.
	APIKeyCreate(ctx context.Context, row *APIKeyRow) error
	// APIKeyByHash returns the key whose token hashes to tokenHash
	// (lowercase hex SHA-256), revoked and expired ones included (the
	// caller decides what they may do), or ErrNotFound. It reads the row
	// on every call: a revocation on any node holds at once.
	APIKeyByHash(ctx context.Context, tokenHash string) (*APIKeyRow, error)
	// APIKeyGet returns one key by id, or ErrNotFound.
	APIKeyGet(ctx context.Context, id string) (*APIKeyRow, error)
	// APIKeyList returns every key, revoked ones included, oldest first.
	APIKeyList(ctx context.Context) ([]*APIKeyRow, error)
	// APIKeyRevoke sets the key's RevokedAt to at (ErrNotFound if there is
	// no such key); revoking a revoked key keeps its first revocation time.
	APIKeyRevoke(ctx context.Context, id string, at time.Time) error
	// APIKeyTouch records a use of the key at at: LastUsedAt becomes at
	// unless it is already later (uses on several nodes may arrive out of
	// order). ErrNotFound if there is no such key.
	APIKeyTouch(ctx context.Context, id string, at time.Time) error

	// The audit log (internal/server audit.go): append-only. No method
	// changes or deletes one entry; only AuditPrune removes the old ones,
	// for a retention period.

	// AuditAppend stores row as the next entry and returns its Seq (which
	// grows with every append; row.Seq is ignored).
	AuditAppend(ctx context.Context, row *AuditRow) (int64, error)
	// AuditList returns the entries p selects, oldest first (by Seq).
	AuditList(ctx context.Context, p *AuditListParams) ([]*AuditRow, error)
	// AuditPrune deletes the entries whose Time is before before, and
	// returns how many it deleted. Pruning the same period twice (two
	// nodes at once) deletes each entry once and is no error.
	AuditPrune(ctx context.Context, before time.Time) (int64, error)

	// NodeAnnounce records the addresses a node's API listens on,
	// replacing what the same node announced before, so that every node
	// refuses them to its sessions (a session must never reach the control
	// plane, whichever node serves it).
	NodeAnnounce(ctx context.Context, row *NodeRow) error
	// NodeList returns every node's announced addresses, by node id.
	NodeList(ctx context.Context) ([]*NodeRow, error)

	// Runners (self-managed environments) connected to a node: each node
	// records the connections it holds, so that every node lists them
	// (014_runners). A runner is named within its project; a newer
	// connection under the same name replaces the row, and the older
	// connection learns it from RunnerTouch. Liveness is measured by the
	// store's clock (the database's now()), never by the nodes': two nodes
	// whose clocks disagree still agree on which row is stale.

	// RunnerConnect records a runner's connection, its ConnectedAt and
	// SeenAt set to the store's clock (in row too; what the caller put
	// there is ignored). It replaces the row holding its (project, name)
	// only when that row has the same KeyID (the runner reconnecting) or
	// was not seen within staleAfter of the store's clock (its holder's
	// liveness expired); otherwise ErrConflict and the row is untouched,
	// so that one runner key cannot take another's name.
	RunnerConnect(ctx context.Context, row *RunnerRow, staleAfter time.Duration) error
	// RunnerTouch sets the connection's SeenAt to the store's clock (its
	// liveness); ErrNotFound when the row is gone or now holds another
	// connection (one that replaced it, on this node or another): the
	// row is then left as it is.
	RunnerTouch(ctx context.Context, project, name, connID string) error
	// RunnerDisconnect deletes the row of (project, name) if it still
	// holds connID (a replaced connection removes nothing); no error when
	// it does not.
	RunnerDisconnect(ctx context.Context, project, name, connID string) error
	// RunnerList returns the runners of project ("": of every project)
	// seen within staleAfter of the store's clock (0: every row, stale
	// or not), by project then name.
	RunnerList(ctx context.Context, project string, staleAfter time.Duration) ([]*RunnerRow, error)
	// RunnerSessions records the sessions whose environments are open on
	// the connection connID, if it still holds the row (else
	// ErrNotFound). RunnerConnect starts a row with none.
	RunnerSessions(ctx context.Context, project, name, connID string, sessions []string) error

	// Webhooks (the webhook package's durable state; see 004_webhooks and
	// 005_webhook_claims).

	// WebhookEndpointCreate inserts a server-wide endpoint; ErrConflict if
	// the id exists.
	WebhookEndpointCreate(ctx context.Context, row *WebhookEndpointRow) error
	// WebhookEndpointGet returns one endpoint, or ErrNotFound.
	WebhookEndpointGet(ctx context.Context, id string) (*WebhookEndpointRow, error)
	// WebhookEndpointList returns every endpoint of project ("": of every
	// project; disabled ones too), oldest first.
	WebhookEndpointList(ctx context.Context, project string) ([]*WebhookEndpointRow, error)
	// WebhookEndpointDelete removes an endpoint (ErrNotFound if there is
	// none) and marks its pending deliveries disabled.
	WebhookEndpointDelete(ctx context.Context, id string, now time.Time) error
	// WebhookSessionInit returns the session's webhook state, creating it
	// with secret (and cursor 0) when there is none, so two callers racing
	// get the same secret. ErrNotFound if the session does not exist.
	WebhookSessionInit(ctx context.Context, sessionID, secret string) (*WebhookSessionRow, error)
	// WebhookEnqueue inserts deliveries (a delivery whose id exists is
	// skipped) and moves the session's cursor to cursor, in one transaction,
	// conditional on the cursor still being fromCursor (else ErrConflict).
	WebhookEnqueue(ctx context.Context, sessionID string, fromCursor, cursor int64, rows []*WebhookDeliveryRow) error
	// WebhookDue returns up to limit pending deliveries whose next attempt
	// is at or before now, earliest first. It claims nothing, so it is only
	// a look (for inspection): a dispatcher sends only what
	// WebhookClaimDue gave it.
	WebhookDue(ctx context.Context, now time.Time, limit int) ([]*WebhookDeliveryRow, error)
	// WebhookClaimDue claims for p.Owner, until p.Until, up to p.Limit
	// pending deliveries whose next attempt is at or before p.Now, earliest
	// first, and returns them as claimed. Concurrent claims (by any owners,
	// on any node) get disjoint deliveries.
	//
	// A claim sets ClaimedBy and moves the delivery's next attempt time to
	// p.Until: a claimed delivery is not due, so nobody (its owner
	// included) claims it again while the claim lasts, and a claim that
	// ends with no attempt recorded (its owner died mid-attempt) leaves the
	// delivery due again at p.Until, for any owner, with the same id.
	// Claiming such a delivery records the attempt that was in flight
	// under the claim that ran out, with its owner and LostAttemptError
	// (the receiver may have it), and counts it: the log of attempts
	// shows every request that may have reached the receiver.
	WebhookClaimDue(ctx context.Context, p *WebhookClaimParams) ([]*WebhookDeliveryRow, error)
	// WebhookReleaseClaims ends every claim owner holds on a pending
	// delivery, making the delivery due at now (or when it was due, if
	// that is earlier), and returns how many it released. A dispatcher
	// calls it when it stops with attempts abandoned (inFlightLost false:
	// it cancelled them itself, so they are not attempts), and when it
	// starts, for the claims its previous run left (a node's id is its
	// own): inFlightLost true, since that run died with the attempts in
	// flight, which are then recorded as WebhookClaimDue records them.
	WebhookReleaseClaims(ctx context.Context, owner string, now time.Time, inFlightLost bool) (int, error)
	// WebhookNextDue returns the earliest next attempt time of a pending
	// delivery (for a claimed one, the end of its claim), or nil when none
	// is pending.
	WebhookNextDue(ctx context.Context) (*time.Time, error)
	// WebhookRecordAttempt records one attempt of a delivery, made under
	// the claim of p.Attempt.Owner, ends that claim and sets the delivery's
	// new status, attempts count and next attempt time, in one transaction.
	// With DisableTarget it also disables the delivery's target (the
	// endpoint, or the webhook_url of the session p.TargetSessionID names)
	// and marks the target's other pending deliveries disabled: the
	// endpoint's, or those to the webhook_url of that session and of the
	// delivery's own. (Those of the URL's other sessions, the sub-agents
	// of a tree whose root's URL it is, are the dispatcher's to leave
	// unsent when it finds the URL disabled.)
	//
	// Only the claimer's attempt counts: the delivery must be claimed by
	// p.Attempt.Owner and have p.Attempt.Attempt-1 attempts (the count its
	// claim returned), else ErrLeaseLost and nothing is written. This
	// fences an owner whose claim expired and was taken (by another owner,
	// or by a later claim of its own whose attempt was recorded first), so
	// every attempt number of a delivery is recorded once, by the claim it
	// was made under. A claim that expired but was not taken still records.
	// The new status applies only to a delivery still pending: one disabled
	// while the attempt was in flight (its endpoint deleted, or its target
	// disabled by a 410 to another delivery) stays disabled, and the
	// attempt is recorded all the same.
	WebhookRecordAttempt(ctx context.Context, p *WebhookAttemptParams) error
	// WebhookDeliveryList pages deliveries newest first, each with its
	// attempts.
	WebhookDeliveryList(ctx context.Context, p *WebhookDeliveryListParams) ([]*WebhookDeliveryRow, error)

	// Tree budgets (see treebudget.go and 007_tree_budgets).

	// TreeBudgetPut creates the ledger of the tree rooted at p.RootID, or
	// replaces its limits (and raises its spent to p.Spent if behind).
	TreeBudgetPut(ctx context.Context, p *TreeBudgetPutParams) error
	// TreeBudgetGet returns a tree's ledger with its live reservations
	// summed, or ErrNotFound.
	TreeBudgetGet(ctx context.Context, rootID string) (*TreeBudgetRow, error)
	// TreeReserve decides, atomically with every other reservation of the
	// tree (on any node), whether a call may start, by storeutil.TreeDecide
	// on the ledger and its live reservations; a granted call's reservation
	// is stored, and reservations whose lease ended are dropped. ErrNotFound
	// if the tree has no ledger.
	TreeReserve(ctx context.Context, p *TreeReserveParams) (*TreeReserveResult, error)

	// The trajectory monitor's state shared by a tree of sessions (see
	// 018_monitor_trees): one record per tree, replaced conditionally.

	// MonitorTreeGet returns the record of the tree rooted at rootID, or
	// ErrNotFound when none of its sessions wrote one yet.
	MonitorTreeGet(ctx context.Context, rootID string) (*MonitorTreeRow, error)
	// MonitorTreePut replaces the tree's record with p.State if its version
	// is still p.Version (0: there is none yet, and it is created), and
	// gives it version p.Version+1; ErrConflict when another writer (of
	// any node) replaced or created it since it was read.
	MonitorTreePut(ctx context.Context, p *MonitorTreePutParams) error

	// Subscribe returns notifications committed after the call until cancel is
	// called or ctx ends. Notifications are hints: a slow subscriber may miss
	// some (the channel is buffered and never blocks writers), so it must
	// re-read the store when woken.
	Subscribe(ctx context.Context) (ch <-chan Notification, cancel func())
}

// Notification tells subscribers that something committed.
type Notification struct {
	Kind      NotificationKind
	SessionID string
	// Seq is the session's last event seq after the commit (KindEvents).
	Seq int64
	// Status is the session's status after the commit (KindEvents), as
	// the commit stored it, so that a waiter for a status need not read the
	// session at each notice. Empty when the notice does not say: one
	// heard from another node that sends PostgreSQL's payload of version 1
	// (this release does, for the nodes of the one before; see
	// postgres.sentPayloadVersion) or announced again after a lost
	// connection; a subscriber that needs the status then reads the
	// session.
	Status string
}

// NotificationKind says what changed.
type NotificationKind int

// Notification kinds.
const (
	// KindEvents: a session's journal grew.
	KindEvents NotificationKind = iota + 1
	// KindRunnable: a session became claimable (runnable or a new wake time).
	KindRunnable
	// KindSecrets: a vault secret was created, replaced or deleted
	// (SessionID and Seq are empty); holders of secret values, such as a
	// redactor, re-read them.
	KindSecrets
	// KindActionRaised: an append recorded a pending action
	// (ActionRaised), of session SessionID; without a session, any may
	// have been (a listener that lost its connection). Holders of a
	// "nothing pending" answer look again.
	KindActionRaised
)

// ActionRaised reports whether docs record a pending action: an append
// with such a row is announced as KindActionRaised too.
func ActionRaised(docs []DocWrite) bool {
	for _, d := range docs {
		if d.Kind == DocAction && d.Status == ActionStatusPending {
			return true
		}
	}
	return false
}

// ActionStatusPending is the Status of an action's row while it waits for
// its decision (longhaultype.ActionPending, which this package does not
// import).
const ActionStatusPending = "pending"

// Event is a stored journal entry.
type Event struct {
	SessionID string
	Seq       int64
	Type      string
	Time      time.Time
	TurnID    string
	Step      int
	WorkerID  string
	Data      json.RawMessage
}

// Numbered returns events as a store keeps them once written after afterSeq
// to session sessionID: numbered in order, their times at microsecond
// precision in UTC (what both drivers' encodings keep). The engine reads a
// creation its runner writes (before it is written) this way.
func Numbered(sessionID string, afterSeq int64, in []NewEvent) []Event {
	out := make([]Event, len(in))
	for i, e := range in {
		out[i] = Event{
			SessionID: sessionID,
			Seq:       afterSeq + int64(i) + 1,
			Type:      e.Type,
			Time:      time.UnixMicro(e.Time.UnixMicro()).UTC(),
			TurnID:    e.TurnID,
			Step:      e.Step,
			WorkerID:  e.WorkerID,
			Data:      e.Data,
		}
	}
	return out
}

// NewEvent is an event to append; the store assigns Seq.
type NewEvent struct {
	Type     string
	Time     time.Time
	TurnID   string
	Step     int
	WorkerID string
	Data     json.RawMessage
}

// AgentRow is one version of an agent definition.
type AgentRow struct {
	// Project is the project the agent belongs to: names are unique
	// within a project.
	Project   string
	Name      string
	Version   int
	Spec      json.RawMessage
	CreatedAt time.Time
	// CreatedBy is who defined the version (the JSON of an lt.Actor,
	// opaque to the store); nil when unknown (versions stored before
	// actors were recorded).
	CreatedBy json.RawMessage
}

// AgentInsertParams adds version Version of an agent. ErrConflict if that
// version exists (two concurrent writers: exactly one wins).
type AgentInsertParams struct {
	Project   string
	Name      string
	Version   int
	Spec      json.RawMessage
	CreatedAt time.Time
	CreatedBy json.RawMessage // nil: unknown
}

// DefaultProject is the project of a session created without one, and of
// the sessions stored before projects existed (the migrations' column
// default): lt.DefaultProject, which the store does not import.
const DefaultProject = "default"

// SessionRow is a session as stored.
type SessionRow struct {
	ID string
	// Project is the project the session belongs to (DefaultProject for
	// sessions stored before projects existed, and when SessionCreate is
	// given none); sub-agents and forks are in their parent's.
	Project      string
	AgentName    string
	AgentVersion int
	ParentID     string
	Status       string
	// Spec is the pinned input snapshot (the agent spec the session started
	// with); it never changes.
	Spec json.RawMessage
	// State is the engine's projection of the journal (opaque to the store).
	State     json.RawMessage
	LastSeq   int64
	Runnable  bool
	WakeAt    *time.Time
	Lease     Lease
	CreatedAt time.Time
	UpdatedAt time.Time
}

// LostAttemptError is the error of an attempt recorded after the fact:
// it was in flight under a claim whose owner stopped before recording it.
const LostAttemptError = "outcome unknown: the attempt was in flight when its node stopped (the receiver may have received it, with the same webhook-id)"

// Lease identifies who may write a session. Owner is empty when unleased.
type Lease struct {
	SessionID string
	Owner     string
	Epoch     int64
	ExpiresAt time.Time
	// PreviousOwner is set by LeaseClaim when the claim took the session
	// over: the owner of a lease that expired without being released (its
	// worker died, stalled or lost the database; after a restart it may
	// be this owner's previous run). Empty when the session was free.
	// Other methods ignore it.
	PreviousOwner string
}

// SessionCreateParams inserts a session.
type SessionCreateParams struct {
	Session SessionRow // LastSeq and Lease are ignored
	Events  []NewEvent
	Docs    []DocWrite
	// Blobs are written in the same transaction (the first events may
	// already refer to them: a large input is moved to a blob).
	Blobs []BlobWrite
	// BlobRefs are digests of blobs stored before (BlobPut) that the
	// session refers to: recorded as its own, like Blobs (see
	// BlobInProject). An import stores a file's blobs first, then its
	// sessions.
	BlobRefs []string
	// ParentAt, when set, creates the session only while the session it
	// names is as its lease holder last read or wrote it: a sub-agent is
	// made only on its parent's journal as the spawning worker knows it,
	// so that a cancel or a pause answered since comes first. ErrConflict
	// and ErrParentMoved when that journal no longer ends at ExpectedSeq
	// (another conflict, a session with that id, is ErrConflict alone),
	// ErrLeaseLost when the lease is not Fence, and nothing is created. PostgreSQL holds the parent's row (FOR SHARE)
	// until the creation commits, so a write to the parent's journal
	// comes after the child exists or sees the creation refused.
	ParentAt *JournalAt
	// Webhook, when set, is the session's webhook state (its signing
	// secret and the seq its notifications start after; SessionID and
	// DisabledAt are ignored), written in the same transaction: a session
	// whose creation is answered with its secret (a fork) has no step
	// after the commit that could fail.
	Webhook *WebhookSessionRow
	// Claim, when set, creates the session already leased, as a claim
	// would leave it: held by Claim.Owner until Claim.ExpiresAt, at epoch
	// 1. A node that has a free worker for the session it creates runs it
	// without a claim (a write of its own). Subscribers hear no
	// KindRunnable then: no other worker may take it while the lease lives.
	Claim *SessionClaim
}

// JournalAt is a session's journal as a lease holder knows it
// (SessionCreateParams.ParentAt).
type JournalAt struct {
	SessionID   string
	ExpectedSeq int64
	// Fence, when set, must be the session's current lease (owner and
	// epoch).
	Fence *Lease
}

// SessionClaim is the lease a session is created with (SessionCreateParams).
type SessionClaim struct {
	Owner     string
	ExpiresAt time.Time
}

// Lease returns the lease a session created with c holds.
func (c *SessionClaim) Lease(sessionID string) Lease {
	return Lease{SessionID: sessionID, Owner: c.Owner, Epoch: 1, ExpiresAt: c.ExpiresAt}
}

// SessionListParams filters and pages a list, newest first. Cursor is the
// last id of the previous page.
type SessionListParams struct {
	// Project keeps the sessions of one project; "" keeps every project's.
	Project  string
	Status   string
	Agent    string
	ParentID string
	Cursor   string
	Limit    int
	// CreatedFrom and CreatedBefore, when not zero, keep the sessions
	// created at or after CreatedFrom and before CreatedBefore (a window
	// read through the creation index, for reports).
	CreatedFrom   time.Time
	CreatedBefore time.Time
	// RootsOnly keeps the sessions without a parent (no sub-agents).
	RootsOnly bool
}

// EventAppendParams appends events to a session and writes its projections.
type EventAppendParams struct {
	SessionID string
	// ExpectedSeq must equal the session's last seq, else ErrConflict.
	ExpectedSeq int64
	// Fence, when set, must be the session's current lease (owner and epoch,
	// unexpired or not), else ErrLeaseLost. API writes leave it nil and rely on
	// ExpectedSeq.
	Fence  *Lease
	Events []NewEvent
	// Status, State and UpdatedAt replace the session's projection.
	Status    string
	State     json.RawMessage
	UpdatedAt time.Time
	// Runnable and WakeAt replace the session's wake condition.
	Runnable bool
	WakeAt   *time.Time
	// ReleaseLease clears the lease owner in the same transaction (the
	// session is waiting or done, so no worker should hold it).
	ReleaseLease bool
	// Docs are projection rows to upsert (turns, actions, effects, ...).
	Docs  []DocWrite
	Blobs []BlobWrite
	// TreeSettle, when set, settles calls in the session's tree ledger in
	// the same transaction (a tree without a ledger is left alone).
	TreeSettle *TreeSettle
	// Encoded says that State, every event's Data and every doc's Doc
	// were written by encoding/json's encoder (json.Marshal), which writes
	// only valid JSON (a json.RawMessage it holds is checked as it is
	// written): the store does not parse them again to check they are
	// JSON. Everything else is checked as ever, invalid UTF-8 too where
	// the driver refuses it (the encoder passes a RawMessage's bytes
	// through). The engine sets it for the batches it encoded itself; a
	// write of bytes from anywhere else leaves it false.
	Encoded bool
}

// LeavesClaimable reports whether the append may leave its session
// claimable (runnable or with a wake time), so schedulers should hear
// KindRunnable. A worker's append that keeps its lease leaves the session
// claimed: the release, or the lease's expiry (which schedulers poll for),
// makes it claimable, not the append. Saying so anyway would send every
// scheduler to claim nothing at every step of every running session.
func (p *EventAppendParams) LeavesClaimable() bool {
	return (p.Runnable || p.WakeAt != nil) && (p.Fence == nil || p.ReleaseLease)
}

// DocKind names a projection table.
type DocKind string

// Projection tables.
const (
	DocTurn       DocKind = "turn"
	DocAction     DocKind = "action"
	DocEffect     DocKind = "effect"
	DocArtifact   DocKind = "artifact"
	DocCheckpoint DocKind = "checkpoint"
)

// DocWrite upserts one projection row (by Kind and ID).
type DocWrite struct {
	Kind      DocKind
	ID        string
	SessionID string
	Status    string
	Doc       json.RawMessage
	CreatedAt time.Time
}

// DocRow is a stored projection row.
type DocRow struct {
	ID        string
	SessionID string
	Status    string
	Doc       json.RawMessage
	CreatedAt time.Time
}

// ActionListParams filters and pages ActionListAll.
type ActionListParams struct {
	// Status, Type and SessionID filter on the row's status, the action
	// document's "type" and the row's session; "" does not filter.
	Status    string
	Type      string
	SessionID string
	// Project keeps the actions of the sessions of one project; "" does
	// not filter.
	Project string
	// After, when set, starts the page after that position: the CreatedAt
	// and ID of the previous page's last row. A position need not be a row
	// that still exists, so paging never fails on a cursor.
	After *DocCursor
	// Limit bounds the page: 0 means 50; more than 1000 is an error.
	Limit int
}

// ActionTypeStats is ActionPendingStats' row for one action type.
type ActionTypeStats struct {
	Type  string
	Count int64
	// OldestCreatedAt is the creation time of the oldest pending action of
	// the type.
	OldestCreatedAt time.Time
}

// DocCursor is a position in a list ordered by (CreatedAt, ID).
type DocCursor struct {
	CreatedAt time.Time
	ID        string
}

// BlobWrite stores a blob in the same transaction as the events that refer to it.
type BlobWrite struct {
	SHA256 string
	Data   []byte
}

// LeaseClaimParams claims work for one worker.
type LeaseClaimParams struct {
	Owner     string
	Now       time.Time
	ExpiresAt time.Time
	Limit     int
}

// IdempotencyRow is the stored first response to an idempotent POST.
type IdempotencyRow struct {
	Scope      string // e.g. "POST /v1/sessions"
	Key        string
	BodySHA256 string
	Status     int
	Response   []byte
	CreatedAt  time.Time
}

// IdempotencyClaim is an idempotent request's hold on its key while it
// runs (IdempotencyClaim). Its Seed is what the request's creations are
// named after (a session made by POST /v1/sessions is "ses_"+Seed): a
// request run again after its first run died between its work's commit
// and its response's record finds what the first run made, instead of
// making it a second time.
type IdempotencyClaim struct {
	Scope      string
	Key        string
	BodySHA256 string
	Seed       string
	// Token is the run's: only it renews, releases or (by its record)
	// ends the claim.
	Token string
	// Owner is the node running the request (IdempotencyExpireOwner).
	Owner     string
	ExpiresAt time.Time
	CreatedAt time.Time
}

// IdempotencyClaimResult is what IdempotencyClaim found; exactly one field
// is set.
type IdempotencyClaimResult struct {
	// Record is the key's stored response: nothing was claimed.
	Record *IdempotencyRow
	// Held is another run's claim, live or with another body: nothing was
	// claimed.
	Held *IdempotencyClaim
	// Claimed is the caller's claim: the one it gave, or an expired one
	// with the same body taken over (its Seed and CreatedAt the first
	// run's, its Token and ExpiresAt the caller's).
	Claimed *IdempotencyClaim
}

// NodeRow is what a node announced: its id and the addresses ("host:port")
// its API listens on.
type NodeRow struct {
	ID          string
	Addrs       []string
	AnnouncedAt time.Time
}

// RunnerRow is one runner's connection, as the node holding it records
// it.
type RunnerRow struct {
	Project string
	Name    string
	// ConnID names this connection (a newer one under the same name
	// replaces the row).
	ConnID string
	// KeyID is the API key the runner connected with.
	KeyID string
	// Node is the id of the node holding the connection.
	Node     string
	Labels   []string
	Capacity int
	// Version is the runner's build, as it announced it.
	Version string
	// Protocol is the version of the runner protocol it speaks (its
	// Hello's; 1 for a row recorded before protocols were).
	Protocol    int
	ConnectedAt time.Time
	// SeenAt is the connection's last sign of life (RunnerTouch). Both
	// times are the store's clock.
	SeenAt time.Time
	// Sessions are the sessions whose environments are open on it
	// (RunnerSessions), by id.
	Sessions []string
}

// APIKeyRow is one API key as stored: its token only as a hash.
type APIKeyRow struct {
	ID      string
	Name    string
	Role    string
	Project string
	// Prefix is the token's first characters, to tell keys apart.
	Prefix string
	// TokenHash is the lowercase hex SHA-256 of the token.
	TokenHash  string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
}

// AuditRow is one entry of the audit log: a request that changed state, or
// one that was refused.
type AuditRow struct {
	// Seq numbers the entries in the order they were appended (set by the
	// store).
	Seq  int64
	Time time.Time
	// KeyID, ActorName and ActorRole say who called (the caller the
	// request authenticated as; all empty when it authenticated as no
	// one).
	KeyID     string
	ActorName string
	ActorRole string
	// KeyPrefix is the first characters of a refused token (never the
	// whole token), when the request sent one that named no caller.
	KeyPrefix string
	// Remote is the peer's IP address.
	Remote string
	// Method is the HTTP method, Route the pattern of the route it
	// matched ("" for none), Targets the route's path values (the ids the
	// request named: {"id": "ses_…", "action_id": "act_…"}).
	Method    string
	Route     string
	Targets   map[string]string
	Status    int
	RequestID string
}

// AuditListParams selects a page of the audit log, oldest first.
type AuditListParams struct {
	// Since, when not zero, keeps the entries at or after it.
	Since time.Time
	// Actor, when set, keeps the entries whose KeyID, ActorName or
	// KeyPrefix is Actor.
	Actor string
	// After keeps the entries with Seq > After (the previous page's last).
	After int64
	// Limit bounds the page (0: storeutil.AuditPage's default).
	Limit int
}

// SecretRow is one vault secret as stored: the value only as AES-GCM
// ciphertext, which the vault seals with a key the store never sees.
type SecretRow struct {
	// Project is the project whose sessions may use the secret: names
	// are unique within a project.
	Project    string
	Name       string
	Ciphertext []byte
	Nonce      []byte
	// KeyID identifies the key that sealed the value (not the key itself),
	// so a vault opened with another key says so instead of failing to
	// decrypt.
	KeyID string
	// Hosts are the hosts the secret may be sent to.
	Hosts []string
	// Inject says how the secret is injected into requests (a JSON object
	// the vault defines).
	Inject    json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// WebhookEndpointRow is a webhook endpoint of a project.
type WebhookEndpointRow struct {
	ID string
	// Project is the project whose sessions' events the endpoint
	// receives.
	Project string
	URL     string
	// Events filters the notification types sent; empty sends all.
	Events []string
	// Secrets sign each request (several during a key rotation).
	Secrets    []string
	CreatedAt  time.Time
	DisabledAt *time.Time
}

// WebhookSessionRow is the dispatcher's state for one session.
type WebhookSessionRow struct {
	SessionID string
	Secret    string
	// Cursor is the seq of the last event turned into notifications.
	Cursor     int64
	DisabledAt *time.Time
}

// Webhook delivery statuses.
const (
	WebhookPending   = "pending"
	WebhookDelivered = "delivered"
	WebhookFailed    = "failed"
	WebhookDisabled  = "disabled"
)

// WebhookDeliveryRow is one notification to one target (the outbox).
type WebhookDeliveryRow struct {
	// ID is the webhook-id, the same on every attempt.
	ID string
	// EndpointID is the endpoint's id, or "" for the session's webhook_url.
	EndpointID string
	// Project is the project of the delivery's session (set by the
	// dispatcher), kept so that a listing can keep to a project.
	Project       string
	SessionID     string
	URL           string
	Type          string
	EventSeq      int64
	Body          []byte
	Status        string
	Attempts      int
	NextAttemptAt *time.Time
	// ClaimedBy is the owner of the delivery's latest claim, "" when no
	// claim is held: WebhookClaimDue sets it, the attempt recorded under
	// the claim and WebhookReleaseClaims clear it. While a pending delivery
	// is claimed, NextAttemptAt is the end of the claim; once that has
	// passed, the claim is expired and the delivery is due again.
	ClaimedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Pos orders deliveries (it is the list cursor); set by the store.
	Pos int64
	// AttemptList is filled by WebhookDeliveryList, oldest first.
	AttemptList []WebhookAttemptRow
}

// WebhookAttemptRow is one recorded delivery attempt.
type WebhookAttemptRow struct {
	Attempt int
	// Owner made the attempt, under its claim on the delivery (a node id);
	// "" for attempts recorded before deliveries were claimed.
	Owner      string
	At         time.Time
	StatusCode int // 0 when no response arrived
	Error      string
	Duration   time.Duration
}

// WebhookClaimParams claims due deliveries for one owner.
type WebhookClaimParams struct {
	// Owner identifies the claimer (a node id); required.
	Owner string
	// Now is the claimer's time: deliveries due at or before it are
	// claimed.
	Now time.Time
	// Until ends the claims; it must be after Now, and long enough for
	// one attempt.
	Until time.Time
	// Limit bounds the deliveries claimed, from 1 to 1000: as many as the
	// claimer can start at once, so none waits for a slot while its claim
	// runs out.
	Limit int
}

// WebhookAttemptParams records an attempt and the delivery's new state.
// Attempt.Owner must hold the delivery's claim (see WebhookRecordAttempt).
type WebhookAttemptParams struct {
	DeliveryID    string
	Attempt       WebhookAttemptRow
	Status        string
	NextAttemptAt *time.Time
	DisableTarget bool
	// TargetSessionID is, for a delivery to a session's webhook_url, the
	// session whose URL it is, when that is not the delivery's own session
	// (a sub-agent's notifications go to its root's): DisableTarget
	// disables that session's webhook_url. "": the delivery's session.
	TargetSessionID string
	Now             time.Time
}

// WebhookDeliveryListParams pages WebhookDeliveryList: BeforePos 0 starts
// at the newest; Limit 0 means 50.
type WebhookDeliveryListParams struct {
	BeforePos int64
	Limit     int
	// Project keeps to the deliveries of one project ("": every project).
	Project string
}

// MonitorTreeRow is the trajectory monitor's record of one session tree:
// what its detectors count across the tree's sessions (never a secret's
// bytes), opaque to the store.
type MonitorTreeRow struct {
	RootID  string
	State   []byte
	Version int64
}

// MonitorTreePutParams replaces a tree's monitor record (MonitorTreePut).
type MonitorTreePutParams struct {
	RootID string
	State  []byte
	// Version is the version read (MonitorTreeGet); 0 when there was no
	// record.
	Version int64
}
