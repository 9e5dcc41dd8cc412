package longhaultype

import "time"

// Role is what an API key may do (API.md "Identity, roles, projects,
// audit").
type Role string

// The roles, from the most to the least powerful.
const (
	// RoleAdmin may do everything, in every project: keys, secrets,
	// the audit log.
	RoleAdmin Role = "admin"
	// RoleOperator runs the work of its project: sessions, agents,
	// webhooks, signals.
	RoleOperator Role = "operator"
	// RoleApprover reads, decides actions, reviews and cancels in its
	// project.
	RoleApprover Role = "approver"
	// RoleReader reads its project.
	RoleReader Role = "reader"
	// RoleRunner connects a self-managed environment, nothing else.
	RoleRunner Role = "runner"
)

// Roles lists every role, from the most to the least powerful.
func Roles() []Role {
	return []Role{RoleAdmin, RoleOperator, RoleApprover, RoleReader, RoleRunner}
}

// DefaultProject is the project of what was created without one, and of
// everything that existed before projects did.
const DefaultProject = "default"

// Actor is who made a decision, as the journal records it on the event
// that carries the decision.
type Actor struct {
	// KeyID is the API key's id (key_…), or "sso:" and the user's name for
	// a person a trusted reverse proxy signed in (serve
	// --trusted-proxy-header); empty for a bootstrap key given to serve
	// (--api-key), a local request to a server without keys, or the
	// library in-process.
	KeyID string `json:"key_id,omitempty"`
	// Name is the key's name (a person or a program), or the signed-in
	// user's.
	Name string `json:"name"`
	Role Role   `json:"role"`
}

// APIKey is an API key's metadata (GET /v1/keys). The key itself is shown
// once, in the answer of POST /v1/keys (Key), and stored only as a hash.
type APIKey struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Role    Role   `json:"role"`
	Project string `json:"project"`
	// Prefix is the key's first characters (lh_ and a few more): enough
	// to tell keys apart in a list or an audit entry, never to use one.
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	// Key is the secret token, set only in the answer that creates it.
	Key string `json:"key,omitempty"`
}

// CreateKeyRequest is the body of POST /v1/keys.
type CreateKeyRequest struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Project defaults to DefaultProject.
	Project   string     `json:"project,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Identity is who the caller of GET /v1/me is, and what it may do: what a
// client (the web UI) reads to say who is signed in and to offer only the
// controls the role allows. The server still checks every request.
type Identity struct {
	// KeyID is the API key's id; empty for a bootstrap key, a local
	// request to a server without keys, or the library in-process.
	KeyID string `json:"key_id,omitempty"`
	Name  string `json:"name"`
	Role  Role   `json:"role"`
	// Project is the project the caller sees; empty for every project
	// (an admin's bootstrap key, the local caller, the library).
	Project string `json:"project"`
	// Permissions are the names of the operations the role may call,
	// sorted: the methods of the Go client and library, one per route of
	// the HTTP API ("DecideAction" is POST /v1/sessions/{id}/actions/{id},
	// "Cancel" is POST /v1/sessions/{id}/cancel, and so on).
	Permissions []string `json:"permissions"`
}
