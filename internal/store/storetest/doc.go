// Package storetest is the conformance suite for storage drivers: every
// driver's tests call Run, so the semantics written in internal/store's
// comments (gap-free seqs, optimistic concurrency, lease fencing, claim
// rules, projection upserts, tree budget reservations, notifications,
// sentinel errors) hold for all of them alike.
//
// The suite passes every time explicitly (the store takes its times from
// parameters), uses times at microsecond precision (the precision drivers
// promise), compares JSON documents semantically (a driver may normalise
// them) and waits for notifications with a deadline rather than sleeping.
//
// It imports the standard library, internal/store and testify's require.
// The drivers' tests run it. Who may import it: no package of the module
// (tests aside).
package storetest
