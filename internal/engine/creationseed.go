package engine

import (
	"context"
	"fmt"
	"time"
)

// A request the server ran under an Idempotency-Key may run twice: its
// node died after the work committed and before the response was recorded,
// and the client's retry runs it again (store.IdempotencyClaim). What the
// request creates is named after the seed its claim keeps, so that the
// second run finds what the first made rather than making it again: a
// session created or forked is "ses_"+seed, a turn "turn_"+seed, and a
// webhook endpoint (internal/app) "whe_"+seed.

type seedKey struct{}

// WithCreationSeed returns ctx carrying seed, which names what a creation
// made with it creates (a session, a fork, a turn): made once, whatever
// the number of runs. seed is 26 lowercase letters and digits, as the
// random part of the engine's ids (a lowercase ULID).
func WithCreationSeed(ctx context.Context, seed string) context.Context {
	return context.WithValue(ctx, seedKey{}, seed)
}

// CreationSeed returns the seed ctx carries (WithCreationSeed), for a
// creation outside the engine (a webhook endpoint) to be named after it;
// ok is false without one. A seed of another shape is an error.
func CreationSeed(ctx context.Context) (seed string, ok bool, err error) {
	seed, ok = ctx.Value(seedKey{}).(string)
	if ok && !validSeed(seed) {
		return "", false, fmt.Errorf("creation seed %q is not 26 lowercase letters and digits", seed)
	}
	return seed, ok, nil
}

// creationID is the id of what a creation made with ctx creates: prefix and
// ctx's seed (seeded), or a new one.
func creationID(ctx context.Context, prefix string, now time.Time) (id string, seeded bool, err error) {
	// A seed of another shape is the caller's wiring, never a client's:
	// the server makes seeds.
	seed, ok, err := CreationSeed(ctx)
	if err != nil || !ok {
		return newID(prefix, now), false, err
	}
	return prefix + seed, true, nil
}

func validSeed(s string) bool {
	if len(s) != 26 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
