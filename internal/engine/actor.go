package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The actor of a decision comes with the call's context, never with its
// arguments: the application service puts its caller there (app.WithCaller),
// so every transport's decisions carry who made them without each engine
// method taking one, and nothing a model writes (a tool's output, a
// message) can reach it.

type actorKey struct{}

// WithActor returns ctx carrying a as the actor of the decisions made with
// it.
func WithActor(ctx context.Context, a lt.Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor ctx carries, and whether it carries one.
func ActorFrom(ctx context.Context) (lt.Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(lt.Actor)
	return a, ok
}

// actorOf is the actor to journal on a decision made with ctx: nil when ctx
// carries none. A decision reaching the engine without an actor is a
// wiring mistake of its caller (the engine's own tests call it directly);
// it is journaled without one, as an unknown decider, which no approvers
// rule accepts (checkApprovers).
func actorOf(ctx context.Context) *lt.Actor {
	a, ok := ActorFrom(ctx)
	if !ok {
		return nil
	}
	return &a
}

// sameActor reports whether a and b are the same person: the same key, or
// keys of the same name (a person holds an operator key to start work and
// an approver key to decide: separation of duties must see one person).
// Bootstrap keys, the library and local callers have no key id: their name
// says who they are.
func sameActor(a, b *lt.Actor) bool {
	if a == nil || b == nil {
		return false
	}
	if a.KeyID != "" && a.KeyID == b.KeyID {
		return true
	}
	return a.Name == b.Name
}

// describeActor is an actor as people read it: "alice (approver)".
func describeActor(a *lt.Actor) string {
	if a == nil {
		return "an unknown caller"
	}
	return fmt.Sprintf("%s (%s)", a.Name, a.Role)
}

// checkApprovers refuses (403) a decision on an approval whose policy
// constrains who decides when decider is not one of them. creator is who
// created the session (the root's creator for a sub-agent). A decider the
// engine does not know (no actor) is refused: an approvers rule cannot be
// satisfied by nobody. A creator the journal does not know (a session older
// than actors) cannot be told apart from the decider, so not_creator
// refuses then too rather than guess.
func checkApprovers(a *lt.Action, decider, creator *lt.Actor) error {
	ap := a.Approvers
	if ap == nil {
		return nil
	}
	ok := decider != nil &&
		(len(ap.Roles) == 0 || slices.Contains(ap.Roles, decider.Role)) &&
		(len(ap.Names) == 0 || slices.Contains(ap.Names, decider.Name)) &&
		(!ap.NotCreator || (creator != nil && !sameActor(decider, creator)))
	if ok {
		return nil
	}
	return apierror.Forbidden("the policy %q needs %s: %s may not decide action %s", a.Policy, describeApprovers(ap), describeActor(decider), a.ID)
}

// describeApprovers says what an approvers rule requires, in the words of
// a refusal: "an approver with role admin who did not create the session".
func describeApprovers(ap *lt.Approvers) string {
	var b strings.Builder
	b.WriteString("an approver")
	if len(ap.Roles) > 0 {
		roles := make([]string, len(ap.Roles))
		for i, r := range ap.Roles {
			roles[i] = string(r)
		}
		b.WriteString(" with role " + strings.Join(roles, " or "))
	}
	if len(ap.Names) > 0 {
		if len(ap.Roles) > 0 {
			b.WriteString(",")
		}
		b.WriteString(" named " + strings.Join(ap.Names, " or "))
	}
	if ap.NotCreator {
		b.WriteString(" who did not create the session")
	}
	return b.String()
}
