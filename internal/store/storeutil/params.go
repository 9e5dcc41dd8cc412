package storeutil

import (
	"errors"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// The checks of whole parameter sets and rows, in the order the fields are
// checked (the first bad field is the one reported).

// EventAppend checks the parameters of Store.EventAppend.
func (c Checks) EventAppend(p *store.EventAppendParams) error {
	if p == nil {
		return errors.New("params are nil")
	}
	if err := c.ID("session_id", p.SessionID); err != nil {
		return err
	}
	if p.ExpectedSeq < 0 {
		return fmt.Errorf("expected_seq must not be negative, got %d", p.ExpectedSeq)
	}
	if p.Fence != nil {
		if err := c.ID("fence.owner", p.Fence.Owner); err != nil {
			return err
		}
		if p.Fence.SessionID != "" && p.Fence.SessionID != p.SessionID {
			return fmt.Errorf("fence.session_id %q is not session_id %q", p.Fence.SessionID, p.SessionID)
		}
	}
	if len(p.Events) == 0 {
		return errors.New("events: at least one event is required")
	}
	// The JSON of an encoded append (EventAppendParams.Encoded) is
	// valid by construction: only what the driver cannot store is
	// checked in it.
	c.encoded = p.Encoded
	if err := c.NewEvents(p.Events); err != nil {
		return err
	}
	if err := c.ID("status", p.Status); err != nil {
		return err
	}
	if err := c.JSON("state", p.State); err != nil {
		return err
	}
	if err := c.Time("updated_at", p.UpdatedAt); err != nil {
		return err
	}
	if p.WakeAt != nil {
		if err := c.Time("wake_at", *p.WakeAt); err != nil {
			return err
		}
	}
	if err := c.Docs(p.Docs); err != nil {
		return err
	}
	if err := c.Blobs(p.Blobs); err != nil {
		return err
	}
	return c.TreeSettle(p.TreeSettle)
}

// SessionCreate checks the new session row and the rest of
// Store.SessionCreate's parameters.
func (c Checks) SessionCreate(sess *store.SessionRow, p *store.SessionCreateParams) error {
	if err := c.ID("session.id", sess.ID); err != nil {
		return err
	}
	if err := c.ID("session.agent_name", sess.AgentName); err != nil {
		return err
	}
	if err := c.ID("session.project", sess.Project); err != nil {
		return err
	}
	if sess.AgentVersion < 1 {
		return fmt.Errorf("session.agent_version must be at least 1, got %d", sess.AgentVersion)
	}
	if sess.ParentID == sess.ID {
		return fmt.Errorf("session.parent_id is the session's own id %q", sess.ID)
	}
	if err := c.Text("session.parent_id", sess.ParentID); err != nil {
		return err
	}
	if err := c.ID("session.status", sess.Status); err != nil {
		return err
	}
	if err := c.JSON("session.spec", sess.Spec); err != nil {
		return err
	}
	if err := c.JSON("session.state", sess.State); err != nil {
		return err
	}
	if sess.WakeAt != nil {
		if err := c.Time("session.wake_at", *sess.WakeAt); err != nil {
			return err
		}
	}
	if err := c.Time("session.created_at", sess.CreatedAt); err != nil {
		return err
	}
	if err := c.Time("session.updated_at", sess.UpdatedAt); err != nil {
		return err
	}
	if cl := p.Claim; cl != nil {
		if err := c.ID("claim.owner", cl.Owner); err != nil {
			return err
		}
		if err := c.Time("claim.expires_at", cl.ExpiresAt); err != nil {
			return err
		}
	}
	if pa := p.ParentAt; pa != nil {
		if err := c.ID("parent_at.session_id", pa.SessionID); err != nil {
			return err
		}
		if pa.SessionID != sess.ParentID {
			return fmt.Errorf("parent_at.session_id %q is not the session's parent %q", pa.SessionID, sess.ParentID)
		}
		if pa.ExpectedSeq < 0 {
			return fmt.Errorf("parent_at.expected_seq must not be negative, got %d", pa.ExpectedSeq)
		}
		if f := pa.Fence; f != nil && f.SessionID != pa.SessionID {
			return fmt.Errorf("parent_at.fence is the lease of %q, not of the parent", f.SessionID)
		}
	}
	if err := c.NewEvents(p.Events); err != nil {
		return err
	}
	if err := c.Docs(p.Docs); err != nil {
		return err
	}
	for i, d := range p.BlobRefs {
		if err := c.SHA256(fmt.Sprintf("blob_refs[%d]", i), d); err != nil {
			return err
		}
	}
	if wh := p.Webhook; wh != nil {
		if err := c.ID("webhook.secret", wh.Secret); err != nil {
			return err
		}
		if wh.Cursor < 0 {
			return fmt.Errorf("webhook.cursor must not be negative, got %d", wh.Cursor)
		}
	}
	return c.Blobs(p.Blobs)
}

// AgentInsert checks the parameters of Store.AgentInsert.
func (c Checks) AgentInsert(p *store.AgentInsertParams) error {
	if p == nil {
		return errors.New("params are nil")
	}
	if err := c.ID("project", p.Project); err != nil {
		return err
	}
	if err := c.ID("name", p.Name); err != nil {
		return err
	}
	if p.Version < 1 {
		return fmt.Errorf("version must be at least 1, got %d", p.Version)
	}
	if err := c.JSON("spec", p.Spec); err != nil {
		return err
	}
	if err := c.JSON("created_by", p.CreatedBy); err != nil {
		return err
	}
	return c.Time("created_at", p.CreatedAt)
}

// Idempotency checks an idempotency record before it is stored.
func (c Checks) Idempotency(r *store.IdempotencyRow) error {
	if r == nil {
		return errors.New("row is nil")
	}
	if err := c.ID("scope", r.Scope); err != nil {
		return err
	}
	if err := c.ID("key", r.Key); err != nil {
		return err
	}
	if err := c.ID("body_sha256", r.BodySHA256); err != nil {
		return err
	}
	if r.Status < 100 || r.Status > 599 {
		return fmt.Errorf("status must be an HTTP status (100-599), got %d", r.Status)
	}
	return c.Time("created_at", r.CreatedAt)
}

// IdempotencyClaim checks a claim before it is stored.
func (c Checks) IdempotencyClaim(r *store.IdempotencyClaim) error {
	if r == nil {
		return errors.New("claim is nil")
	}
	for _, f := range []struct{ name, v string }{
		{"scope", r.Scope}, {"key", r.Key}, {"body_sha256", r.BodySHA256}, {"seed", r.Seed}, {"token", r.Token},
	} {
		if err := c.ID(f.name, f.v); err != nil {
			return err
		}
	}
	if err := c.Time("expires_at", r.ExpiresAt); err != nil {
		return err
	}
	return c.Time("created_at", r.CreatedAt)
}

// SecretRow checks a secret before it is stored.
func (c Checks) SecretRow(row *store.SecretRow) error {
	if row == nil {
		return errors.New("row is nil")
	}
	if err := c.ID("project", row.Project); err != nil {
		return err
	}
	if err := c.ID("name", row.Name); err != nil {
		return err
	}
	switch {
	case len(row.Ciphertext) == 0:
		return errors.New("ciphertext is empty")
	case len(row.Ciphertext) > MaxSecretCiphertext:
		return fmt.Errorf("ciphertext is larger than %d bytes", MaxSecretCiphertext)
	case len(row.Nonce) == 0:
		return errors.New("nonce is empty")
	case len(row.Nonce) > MaxSecretNonce:
		return fmt.Errorf("nonce is larger than %d bytes", MaxSecretNonce)
	}
	if err := c.ID("key_id", row.KeyID); err != nil {
		return err
	}
	for i, h := range row.Hosts {
		if err := c.ID(fmt.Sprintf("hosts[%d]", i), h); err != nil {
			return err
		}
	}
	if len(row.Inject) == 0 {
		return errors.New("inject is empty")
	}
	if err := c.JSON("inject", row.Inject); err != nil {
		return err
	}
	if err := c.Time("created_at", row.CreatedAt); err != nil {
		return err
	}
	return c.Time("updated_at", row.UpdatedAt)
}

// MaxNodeAddrs bounds the addresses one node announces.
const MaxNodeAddrs = 16

// NodeRow checks a node's announcement before it is stored.
func (c Checks) NodeRow(row *store.NodeRow) error {
	if row == nil {
		return errors.New("row is nil")
	}
	if err := c.ID("id", row.ID); err != nil {
		return err
	}
	if len(row.Addrs) > MaxNodeAddrs {
		return fmt.Errorf("addrs: at most %d, got %d", MaxNodeAddrs, len(row.Addrs))
	}
	for i, a := range row.Addrs {
		if err := c.ID(fmt.Sprintf("addrs[%d]", i), a); err != nil {
			return err
		}
	}
	return c.Time("announced_at", row.AnnouncedAt)
}

// MaxRunnerLabels bounds a runner's labels.
const MaxRunnerLabels = 32

// RunnerRow checks a runner's connection before it is stored.
func (c Checks) RunnerRow(row *store.RunnerRow) error {
	if row == nil {
		return errors.New("row is nil")
	}
	for _, f := range []struct{ field, v string }{
		{"project", row.Project}, {"name", row.Name}, {"conn_id", row.ConnID}, {"key_id", row.KeyID}, {"node", row.Node},
	} {
		if err := c.ID(f.field, f.v); err != nil {
			return err
		}
	}
	if err := c.Text("version", row.Version); err != nil {
		return err
	}
	if len(row.Labels) > MaxRunnerLabels {
		return fmt.Errorf("labels: at most %d, got %d", MaxRunnerLabels, len(row.Labels))
	}
	for i, l := range row.Labels {
		if err := c.ID(fmt.Sprintf("labels[%d]", i), l); err != nil {
			return err
		}
	}
	if row.Capacity < 0 {
		return fmt.Errorf("capacity: must be >= 0, got %d", row.Capacity)
	}
	if row.Protocol < 0 {
		return fmt.Errorf("protocol: must be >= 0, got %d", row.Protocol)
	}
	// ConnectedAt and SeenAt are the store's to set (its clock), not
	// checked: whatever the caller put there is replaced.
	return nil
}

// StaleAfter checks a runner liveness bound: not negative (0 has the
// meaning the method gives it).
func (Checks) StaleAfter(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("stale_after: must be >= 0, got %s", d)
	}
	return nil
}

// RunnerKey checks what names one runner connection.
func (c Checks) RunnerKey(project, name, connID string) error {
	for _, f := range []struct{ field, v string }{{"project", project}, {"name", name}, {"conn_id", connID}} {
		if err := c.ID(f.field, f.v); err != nil {
			return err
		}
	}
	return nil
}

// APIKeyRow checks a key before it is stored.
func (c Checks) APIKeyRow(row *store.APIKeyRow) error {
	if row == nil {
		return errors.New("row is nil")
	}
	for _, f := range []struct{ field, v string }{
		{"id", row.ID}, {"name", row.Name}, {"role", row.Role}, {"project", row.Project}, {"prefix", row.Prefix},
	} {
		if err := c.ID(f.field, f.v); err != nil {
			return err
		}
	}
	if err := c.SHA256("token_hash", row.TokenHash); err != nil {
		return err
	}
	if err := c.Time("created_at", row.CreatedAt); err != nil {
		return err
	}
	for _, f := range []struct {
		field string
		t     *time.Time
	}{{"last_used_at", row.LastUsedAt}, {"expires_at", row.ExpiresAt}, {"revoked_at", row.RevokedAt}} {
		if f.t == nil {
			continue
		}
		if err := c.Time(f.field, *f.t); err != nil {
			return err
		}
	}
	return nil
}

// MaxAuditTargets bounds an audit entry's targets (a route has a few path
// values).
const MaxAuditTargets = 16

// AuditRow checks an audit entry before it is appended.
func (c Checks) AuditRow(row *store.AuditRow) error {
	if row == nil {
		return errors.New("row is nil")
	}
	if err := c.Time("time", row.Time); err != nil {
		return err
	}
	if err := c.ID("method", row.Method); err != nil {
		return err
	}
	for _, f := range []struct{ field, v string }{
		{"key_id", row.KeyID}, {"actor_name", row.ActorName}, {"actor_role", row.ActorRole},
		{"key_prefix", row.KeyPrefix}, {"remote", row.Remote}, {"route", row.Route}, {"request_id", row.RequestID},
	} {
		if err := c.Text(f.field, f.v); err != nil {
			return err
		}
	}
	if len(row.Targets) > MaxAuditTargets {
		return fmt.Errorf("targets: at most %d, got %d", MaxAuditTargets, len(row.Targets))
	}
	for k, v := range row.Targets {
		if err := c.ID("targets key", k); err != nil {
			return err
		}
		if err := c.Text("targets["+k+"]", v); err != nil {
			return err
		}
	}
	if row.Status < 100 || row.Status > 599 {
		return fmt.Errorf("status must be an HTTP status (100-599), got %d", row.Status)
	}
	return nil
}

// AuditListParams checks p and returns its limit with AuditPage's default
// applied.
func (c Checks) AuditListParams(p *store.AuditListParams) (int, error) {
	if p == nil {
		return 0, errors.New("params are nil")
	}
	if !p.Since.IsZero() {
		if err := c.Time("since", p.Since); err != nil {
			return 0, err
		}
	}
	if err := c.Text("actor", p.Actor); err != nil {
		return 0, err
	}
	if p.After < 0 {
		return 0, fmt.Errorf("after must not be negative, got %d", p.After)
	}
	return AuditPage.Limit(p.Limit)
}

// HandOver checks LeaseHandOver's node and until.
func (c Checks) HandOver(node string, until time.Time) error {
	if err := c.ID("node", node); err != nil {
		return err
	}
	return c.Time("until", until)
}

// RunnerSessions checks RunnerSessions's arguments.
func (c Checks) RunnerSessions(project, name, connID string, sessions []string) error {
	if err := c.RunnerKey(project, name, connID); err != nil {
		return err
	}
	for i, id := range sessions {
		if err := c.ID(fmt.Sprintf("sessions[%d]", i), id); err != nil {
			return err
		}
	}
	return nil
}
