package app

import (
	"context"
	"iter"
	"slices"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Who may do what (API.md "Identity, roles, projects, audit"), as sets of
// roles. An admin may do everything; a runner nothing of the Service (it
// only connects a self-managed environment).
var (
	// readers read a project: sessions and all they derive, agents,
	// reports.
	readers = []lt.Role{lt.RoleAdmin, lt.RoleOperator, lt.RoleApprover, lt.RoleReader}
	// operators run the work: sessions, turns, controls, files, agents,
	// signals, budgets, webhooks.
	operators = []lt.Role{lt.RoleAdmin, lt.RoleOperator}
	// deciders answer a session's questions: decide actions, review.
	// Operators are not among them, so the key that runs the work need not
	// be the one that approves it.
	deciders = []lt.Role{lt.RoleAdmin, lt.RoleApprover}
	// stoppers may cancel a session: who runs it, and who approves it.
	stoppers = []lt.Role{lt.RoleAdmin, lt.RoleOperator, lt.RoleApprover}
	// admins manage the server: keys and secrets.
	admins = []lt.Role{lt.RoleAdmin}
	// people are the roles of those who use the API: every role but a
	// runner's, whose key opens its connection and nothing else (not even
	// GET /v1/me: a key on a machine the server trusts less learns
	// nothing from the API).
	people = readers
)

// Permissions maps every Service method to the roles that may call it: the
// one table of who may do what, for both transports (the HTTP API's routes
// each call one method; the library calls them as an admin). Every App
// method checks it first (Allow). Ready is absent: it is a probe, open to
// anyone (GET /readyz needs no key). A runner may call none: its key
// opens its connection (GET /v1/runners/connect), nothing else.
var Permissions = map[string][]lt.Role{
	// Sessions and turns.
	"CreateSession":  operators,
	"GetSession":     readers,
	"GetSessionTree": readers,
	"ListSessions":   readers,
	"CreateTurn":     operators,
	"ListTurns":      readers,
	"GetTurn":        readers,
	"Fork":           operators,

	// Controls.
	"Cancel":        stoppers,
	"SendSignal":    operators,
	"Review":        deciders,
	"AddConstraint": operators,
	"UpdateBudget":  operators,
	"Steer":         operators,
	"Pause":         operators,
	"Resume":        operators,

	// The journal.
	"ListEvents":       readers,
	"StreamEvents":     readers,
	"StreamTreeEvents": readers,

	// Required actions.
	"ListActions":     readers,
	"ListTreeActions": readers,
	"ListAllActions":  readers,
	"GetAction":       readers,
	"DecideAction":    deciders,

	// Provenance.
	"SessionTrace":    readers,
	"ListEffects":     readers,
	"GetEffect":       readers,
	"ListCheckpoints": readers,
	"ListArtifacts":   readers,
	"GetArtifact":     readers,
	"ArtifactContent": readers,
	"GetBlob":         readers,

	// The workspace.
	"ListFiles":         readers,
	"OpenFile":          readers,
	"PutFileIfMatch":    operators,
	"DeleteFileIfMatch": operators,

	// Agents.
	"PutAgent":    operators,
	"EnsureAgent": operators,
	"ListAgents":  readers,
	"GetAgent":    readers,

	"ListAgentVersions": readers,

	// The vault: admin only (even a secret's name and hosts say much).
	"PutSecret":    admins,
	"ListSecrets":  admins,
	"DeleteSecret": admins,

	// Identity: who the caller is, what it may do.
	"Me": people,
	// Which build serves the API: what a client checks before it relies
	// on a feature.
	"Version": people,

	// API keys.
	"CreateKey": admins,
	"ListKeys":  admins,
	"RevokeKey": admins,

	// The audit log: who did what, and who was refused.
	"ListAudit": admins,

	// Outgoing webhooks: endpoints and their deliveries (URLs, bodies).
	"CreateWebhookEndpoint": operators,
	"ListWebhookEndpoints":  operators,
	"DeleteWebhookEndpoint": operators,
	"ListWebhookDeliveries": operators,

	// Reports.
	"TaskReport": readers,

	// Runners (self-managed environments): who runs the work sees where
	// it can run. Connecting one is not a Service method: it is the
	// server's WebSocket route, open to the runner role alone.
	"ListRunners": operators,
}

// Allowed reports whether role may call the Service method.
func Allowed(method string, role lt.Role) bool {
	return slices.Contains(Permissions[method], role)
}

// AllowedMethods lists, sorted, the Service methods role may call (what
// GET /v1/me tells a client to offer).
func AllowedMethods(role lt.Role) []string {
	var out []string
	for method, roles := range Permissions {
		if slices.Contains(roles, role) {
			out = append(out, method)
		}
	}
	slices.Sort(out)
	return out
}

// Allow is the first thing every App method does, and what the HTTP API
// checks before it decodes a request (so a refused caller learns nothing
// from a 400 or a 404): the caller ctx carries must hold one of the roles
// Permissions gives method; a 403 says the role and what it lacks. A
// missing caller is refused (a transport that forgot to say who calls gets
// nothing, never an admin's powers).
func Allow(ctx context.Context, method string) error {
	c, ok := CallerFrom(ctx)
	if !ok {
		return apierror.Forbidden("no caller identity reached %s: refused", method)
	}
	roles := Permissions[method]
	if slices.Contains(roles, c.Role) {
		return nil
	}
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return apierror.Forbidden("the %s role may not call %s (it needs one of: %s)", RoleOrNone(c.Role), method, strings.Join(names, ", "))
}

// RoleOrNone is a role as a refusal names it ("(none)" for a caller
// without one).
func RoleOrNone(r lt.Role) string {
	if r == "" {
		return "(none)"
	}
	return string(r)
}

// refused is a stream whose only value is err (Allow's refusal), before
// the stream opens.
func refused[T any](err error) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		yield(zero, err)
	}
}
