package app

import (
	"context"

	"github.com/longhaul-dev/longhaul/internal/engine"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Caller is who calls the Service: the identity a transport authenticated
// (the HTTP API from an API key, the library as the program that embeds
// it). Every use case reads it from the context: what it may do (Role),
// where (Project: "" for every project, as an admin), and what the journal
// records as the actor of a decision.
type Caller struct {
	// KeyID is the API key's id; ProxyKeyIDPrefix and the name for a
	// user a trusted reverse proxy signed in (sso.go); empty for a
	// bootstrap key, a local request to a server without keys, or the
	// library in-process.
	KeyID   string
	Name    string
	Role    lt.Role
	Project string
}

// Actor is what the journal records of c on a decision.
func (c Caller) Actor() lt.Actor { return lt.Actor{KeyID: c.KeyID, Name: c.Name, Role: c.Role} }

type callerKey struct{}

// WithCaller returns ctx carrying c, for the Service to read, and c's
// actor for the engine to journal on the decisions made with it.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(engine.WithActor(ctx, c.Actor()), callerKey{}, c)
}

// CallerFrom returns the caller ctx carries, and whether it carries one.
// A Service method reached without one is a wiring mistake of a transport;
// the Service treats it as no identity at all (refused), never as admin.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// WithCreationSeed returns ctx carrying seed, which names what a request
// made with it creates (a session, a fork, a turn, a webhook endpoint) or
// journals (a steer, a constraint, a review, a signal), so that a request
// run twice (its Idempotency-Key's first run died before answering) does
// it once; rerun says an earlier run may have (engine.WithCreationSeed).
func WithCreationSeed(ctx context.Context, seed string, rerun bool) context.Context {
	return engine.WithCreationSeed(ctx, seed, rerun)
}
