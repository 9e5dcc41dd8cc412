package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func doc(kind store.DocKind, id, status, body string, created time.Time) store.DocWrite {
	return store.DocWrite{Kind: kind, ID: id, Status: status, Doc: json.RawMessage(body), CreatedAt: created}
}

func docIDs(rows []*store.DocRow) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

func testDocs(t *testing.T, h *harness) {
	h.createSession("ses_docs")
	h.createSession("ses_empty")
	h.append("ses_docs", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{
			doc(store.DocTurn, "turn_2", "queued", `{"n":2}`, at(2*time.Second)),
			doc(store.DocTurn, "turn_1", "running", `{"n":1}`, at(time.Second)),
			doc(store.DocAction, "act_1", "pending", `{"kind":"approval"}`, at(time.Second)),
			doc(store.DocAction, "act_2", "resolved", `{"kind":"question"}`, at(2*time.Second)),
			doc(store.DocAction, "act_3", "pending", `{"kind":"budget"}`, at(3*time.Second)),
			doc(store.DocEffect, "eff_1", "started", `{"tool":"send_email"}`, at(time.Second)),
			doc(store.DocArtifact, "art_1", "draft", `{"name":"report.md"}`, at(time.Second)),
			doc(store.DocCheckpoint, "chk_1", "", `{"name":"step 1"}`, at(time.Second)),
		}
	})

	turns, err := h.s.TurnList(h.ctx, "ses_docs")
	require.NoError(t, err)
	require.Equal(t, []string{"turn_1", "turn_2"}, docIDs(turns), "creation order")
	require.Equal(t, "ses_docs", turns[0].SessionID, "an empty doc session id means the written session")
	require.Equal(t, at(time.Second), turns[0].CreatedAt)

	// Upsert: a later write replaces status and doc, keeps created_at.
	h.append("ses_docs", 2, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{
			doc(store.DocTurn, "turn_1", "completed", `{"n":1,"done":true}`, at(time.Hour)),
			doc(store.DocAction, "act_1", "resolved", `{"kind":"approval","decision":"approve"}`, at(time.Hour)),
			doc(store.DocEffect, "eff_1", "succeeded", `{"tool":"send_email","ok":true}`, at(time.Hour)),
		}
	})
	turn, err := h.s.TurnGet(h.ctx, "ses_docs", "turn_1")
	require.NoError(t, err)
	require.Equal(t, "completed", turn.Status)
	requireJSON(t, `{"n":1,"done":true}`, turn.Doc)
	require.Equal(t, at(time.Second), turn.CreatedAt, "an upsert keeps the first created_at")
	turns, err = h.s.TurnList(h.ctx, "ses_docs")
	require.NoError(t, err)
	require.Len(t, turns, 2, "an upsert does not duplicate")

	all, err := h.s.ActionList(h.ctx, "ses_docs", "")
	require.NoError(t, err)
	require.Equal(t, []string{"act_1", "act_2", "act_3"}, docIDs(all))
	pending, err := h.s.ActionList(h.ctx, "ses_docs", "pending")
	require.NoError(t, err)
	require.Equal(t, []string{"act_3"}, docIDs(pending))
	resolved, err := h.s.ActionList(h.ctx, "ses_docs", "resolved")
	require.NoError(t, err)
	require.Equal(t, []string{"act_1", "act_2"}, docIDs(resolved))
	act, err := h.s.ActionGet(h.ctx, "ses_docs", "act_1")
	require.NoError(t, err)
	requireJSON(t, `{"kind":"approval","decision":"approve"}`, act.Doc)

	effects, err := h.s.EffectList(h.ctx, "ses_docs")
	require.NoError(t, err)
	require.Len(t, effects, 1)
	require.Equal(t, "succeeded", effects[0].Status)

	arts, err := h.s.ArtifactList(h.ctx, "ses_docs")
	require.NoError(t, err)
	require.Equal(t, []string{"art_1"}, docIDs(arts))
	art, err := h.s.ArtifactGet(h.ctx, "art_1")
	require.NoError(t, err)
	require.Equal(t, "ses_docs", art.SessionID)
	require.Equal(t, "draft", art.Status)
	requireJSON(t, `{"name":"report.md"}`, art.Doc)

	chks, err := h.s.CheckpointList(h.ctx, "ses_docs")
	require.NoError(t, err)
	require.Len(t, chks, 1)
	require.Empty(t, chks[0].Status)

	// A known session without rows lists nothing, without error.
	for name, list := range map[string]func() ([]*store.DocRow, error){
		"turns":       func() ([]*store.DocRow, error) { return h.s.TurnList(h.ctx, "ses_empty") },
		"actions":     func() ([]*store.DocRow, error) { return h.s.ActionList(h.ctx, "ses_empty", "") },
		"effects":     func() ([]*store.DocRow, error) { return h.s.EffectList(h.ctx, "ses_empty") },
		"artifacts":   func() ([]*store.DocRow, error) { return h.s.ArtifactList(h.ctx, "ses_empty") },
		"checkpoints": func() ([]*store.DocRow, error) { return h.s.CheckpointList(h.ctx, "ses_empty") },
	} {
		rows, err := list()
		require.NoError(t, err, name)
		require.Empty(t, rows, name)
	}
	none, err := h.s.ActionList(h.ctx, "ses_docs", "no_such_status")
	require.NoError(t, err)
	require.Empty(t, none)

	// Gets are scoped to their session.
	_, err = h.s.TurnGet(h.ctx, "ses_empty", "turn_1")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = h.s.ActionGet(h.ctx, "ses_empty", "act_1")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// testDocConflict: ids are global, so a doc id of another session is a
// conflict, and it rolls the whole append back.
func testDocConflict(t *testing.T, h *harness) {
	h.createSession("ses_one")
	h.createSession("ses_two")
	h.append("ses_one", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{doc(store.DocArtifact, "art_shared", "final", `{"v":1}`, t0)}
	})
	p := appendParams("ses_two", 1, 1)
	p.Docs = []store.DocWrite{
		doc(store.DocTurn, "turn_two", "queued", `{}`, t0),
		doc(store.DocArtifact, "art_shared", "final", `{"v":2}`, t0),
	}
	_, err := h.s.EventAppend(h.ctx, p)
	require.ErrorIs(t, err, store.ErrConflict)

	art, err := h.s.ArtifactGet(h.ctx, "art_shared")
	require.NoError(t, err)
	require.Equal(t, "ses_one", art.SessionID)
	requireJSON(t, `{"v":1}`, art.Doc)
	require.Equal(t, int64(1), h.session("ses_two").LastSeq, "the append was rolled back whole")
	_, err = h.s.TurnGet(h.ctx, "ses_two", "turn_two")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func testBlobs(t *testing.T, h *harness) {
	data := []byte("the quick brown fox\x00\xff binary too")
	key := sha(data)
	require.NoError(t, h.s.BlobPut(h.ctx, key, data))
	require.NoError(t, h.s.BlobPut(h.ctx, key, data), "putting a blob again is a no-op")
	got, err := h.s.BlobGet(h.ctx, key)
	require.NoError(t, err)
	require.Equal(t, data, got)

	_, err = h.s.BlobGet(h.ctx, sha([]byte("never stored")))
	require.ErrorIs(t, err, store.ErrNotFound)

	has, err := h.s.BlobHas(h.ctx, key)
	require.NoError(t, err)
	require.True(t, has, "BlobHas of a stored blob")
	has, err = h.s.BlobHas(h.ctx, sha([]byte("never stored")))
	require.NoError(t, err)
	require.False(t, has, "BlobHas of an unknown digest")
	_, err = h.s.BlobHas(h.ctx, "not-a-digest")
	require.Error(t, err, "BlobHas refuses a malformed digest")

	// Blobs written with an append commit with it.
	h.createSession("ses_blob")
	big := make([]byte, 256<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	h.append("ses_blob", 1, 1, func(p *store.EventAppendParams) {
		p.Blobs = []store.BlobWrite{{SHA256: sha(big), Data: big}, {SHA256: key, Data: data}}
	})
	got, err = h.s.BlobGet(h.ctx, sha(big))
	require.NoError(t, err)
	require.Equal(t, big, got)

	// A refused append stores none of its blobs.
	orphan := []byte("orphan")
	p := appendParams("ses_blob", 1, 1) // stale seq
	p.Blobs = []store.BlobWrite{{SHA256: sha(orphan), Data: orphan}}
	_, err = h.s.EventAppend(h.ctx, p)
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = h.s.BlobGet(h.ctx, sha(orphan))
	require.ErrorIs(t, err, store.ErrNotFound)
}

// testBlobPutMany: several blobs stored in one call, all or none.
func testBlobPutMany(t *testing.T, h *harness) {
	require.NoError(t, h.s.BlobPutMany(h.ctx, nil), "no blobs: nothing to do")
	already := []byte("stored before the batch")
	require.NoError(t, h.s.BlobPut(h.ctx, sha(already), already))
	empty := []byte{}
	big := make([]byte, 300<<10)
	for i := range big {
		big[i] = byte(i * 13)
	}
	batch := map[string][]byte{sha(already): already, sha(empty): empty, sha(big): big}
	for i := range 40 {
		b := []byte(fmt.Sprintf("blob %d of the batch", i))
		batch[sha(b)] = b
	}
	require.NoError(t, h.s.BlobPutMany(h.ctx, batch), "a batch may hold a blob already stored")
	for digest, data := range batch {
		got, err := h.s.BlobGet(h.ctx, digest)
		require.NoError(t, err)
		require.Equal(t, data, got)
	}
	require.NoError(t, h.s.BlobPutMany(h.ctx, batch), "putting the batch again is a no-op")

	// A batch with one bad digest stores none of its blobs, and the error
	// names the field.
	good := []byte("good blob of a refused batch")
	bad := map[string][]byte{sha(good): good, sha([]byte("other bytes")): []byte("these bytes")}
	err := h.s.BlobPutMany(h.ctx, bad)
	require.ErrorContains(t, err, "sha256")
	has, err := h.s.BlobHas(h.ctx, sha(good))
	require.NoError(t, err)
	require.False(t, has, "a refused batch stores none of its blobs")
	err = h.s.BlobPutMany(h.ctx, map[string][]byte{"not-a-digest": good})
	require.ErrorContains(t, err, "sha256")
}

func testIdempotency(t *testing.T, h *harness) {
	row := &store.IdempotencyRow{
		Scope:      "POST /v1/sessions",
		Key:        "key-1",
		BodySHA256: sha([]byte(`{"agent":"a"}`)),
		Status:     201,
		Response:   []byte(`{"id":"ses_1"}`),
		CreatedAt:  at(time.Second),
	}
	require.NoError(t, h.s.IdempotencyPut(h.ctx, row))
	got, err := h.s.IdempotencyGet(h.ctx, row.Scope, row.Key)
	require.NoError(t, err)
	require.Equal(t, row, got)

	again := *row
	again.Status = 500
	require.ErrorIs(t, h.s.IdempotencyPut(h.ctx, &again), store.ErrConflict)
	got, err = h.s.IdempotencyGet(h.ctx, row.Scope, row.Key)
	require.NoError(t, err)
	require.Equal(t, 201, got.Status, "the first response stays")

	// The same key in another scope is another row.
	other := *row
	other.Scope = "POST /v1/sessions/{id}/turns"
	require.NoError(t, h.s.IdempotencyPut(h.ctx, &other))

	_, err = h.s.IdempotencyGet(h.ctx, row.Scope, "key-2")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// testIdempotencyClaims: a key is held by one run at a time; a claim whose
// run ended without a response is taken over with its seed by the same
// body only, and only once it has expired; a response ends every claim.
func testIdempotencyClaims(t *testing.T, h *harness) {
	body, otherBody := sha([]byte(`{"input":"a"}`)), sha([]byte(`{"input":"b"}`))
	claim := func(token, bodySum, seed string, now, ttl time.Duration) *store.IdempotencyClaimResult {
		t.Helper()
		res, err := h.s.IdempotencyClaim(h.ctx, &store.IdempotencyClaim{
			Scope: "POST /v1/sessions", Key: "key-1", BodySHA256: bodySum, Seed: seed, Token: token, Owner: "node-" + token,
			ExpiresAt: at(now + ttl), CreatedAt: at(now),
		}, at(now))
		require.NoError(t, err)
		n := 0
		for _, set := range []bool{res.Record != nil, res.Held != nil, res.Claimed != nil} {
			if set {
				n++
			}
		}
		require.Equal(t, 1, n, "exactly one of Record, Held, Claimed: %+v", res)
		return res
	}

	first := claim("tok-1", body, "seed-1", time.Second, time.Minute)
	require.NotNil(t, first.Claimed)
	require.Equal(t, store.IdempotencyClaim{
		Scope: "POST /v1/sessions", Key: "key-1", BodySHA256: body, Seed: "seed-1", Token: "tok-1", Owner: "node-tok-1",
		ExpiresAt: at(time.Second + time.Minute), CreatedAt: at(time.Second),
	}, *first.Claimed)

	live := claim("tok-2", body, "seed-2", 2*time.Second, time.Minute)
	require.NotNil(t, live.Held, "a live claim is held")
	require.Equal(t, "tok-1", live.Held.Token)
	require.Equal(t, "seed-1", live.Held.Seed)
	require.Equal(t, "node-tok-1", live.Held.Owner)

	// Renewed by its run only.
	require.NoError(t, h.s.IdempotencyRenew(h.ctx, "POST /v1/sessions", "key-1", "tok-1", at(10*time.Minute)))
	require.ErrorIs(t, h.s.IdempotencyRenew(h.ctx, "POST /v1/sessions", "key-1", "tok-2", at(time.Hour)), store.ErrNotFound)
	held := claim("tok-2", body, "seed-2", 5*time.Minute, time.Minute)
	require.NotNil(t, held.Held, "renewed past 5 minutes")
	require.Equal(t, at(10*time.Minute), held.Held.ExpiresAt)

	// Released without a response: the same body takes it over with the
	// first run's seed, another body does not.
	require.NoError(t, h.s.IdempotencyRelease(h.ctx, "POST /v1/sessions", "key-1", "tok-1", false, at(3*time.Minute)))
	require.NotNil(t, claim("tok-2", otherBody, "seed-2", 4*time.Minute, time.Minute).Held, "another body never takes a claim over")
	again := claim("tok-3", body, "seed-3", 4*time.Minute, time.Minute)
	require.NotNil(t, again.Claimed)
	require.Equal(t, "seed-1", again.Claimed.Seed, "the first run's seed")
	require.Equal(t, "tok-3", again.Claimed.Token)
	require.Equal(t, at(5*time.Minute), again.Claimed.ExpiresAt)
	require.Equal(t, at(time.Second), again.Claimed.CreatedAt)

	// The first run's token no longer holds it: its release changes nothing.
	require.NoError(t, h.s.IdempotencyRelease(h.ctx, "POST /v1/sessions", "key-1", "tok-1", true, at(4*time.Minute)))
	require.NotNil(t, claim("tok-4", body, "seed-4", 4*time.Minute, time.Minute).Held)

	// Expired by time alone (its node died): taken over.
	late := claim("tok-4", body, "seed-4", 6*time.Minute, time.Minute)
	require.NotNil(t, late.Claimed)
	require.Equal(t, "seed-1", late.Claimed.Seed)
	require.Equal(t, "node-tok-4", late.Claimed.Owner)

	// Expired by its node starting again: taken over at once; another
	// node's expiry leaves it.
	n, err := h.s.IdempotencyExpireOwner(h.ctx, "node-tok-1", at(6*time.Minute))
	require.NoError(t, err)
	require.Zero(t, n, "tok-1's node holds nothing now")
	require.NotNil(t, claim("tok-x", body, "seed-x", 6*time.Minute, time.Minute).Held)
	n, err = h.s.IdempotencyExpireOwner(h.ctx, "node-tok-4", at(6*time.Minute+time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	restarted := claim("tok-4b", body, "seed-4b", 6*time.Minute+2*time.Second, time.Minute)
	require.NotNil(t, restarted.Claimed, "the dead incarnation's claim is taken over before it would have expired")
	require.Equal(t, "seed-1", restarted.Claimed.Seed)

	// A response ends the claim: every later run is answered from it.
	require.NoError(t, h.s.IdempotencyPut(h.ctx, &store.IdempotencyRow{
		Scope: "POST /v1/sessions", Key: "key-1", BodySHA256: body, Status: 201, Response: []byte(`{"id":"ses_seed-1"}`), CreatedAt: at(6 * time.Minute),
	}))
	rec := claim("tok-5", body, "seed-5", 7*time.Minute, time.Minute)
	require.NotNil(t, rec.Record)
	require.Equal(t, `{"id":"ses_seed-1"}`, string(rec.Record.Response))
	require.NotNil(t, claim("tok-5", otherBody, "seed-5", 7*time.Minute, time.Minute).Record, "the record answers another body too (the caller refuses it)")

	// Dropped: a retry runs anew, with another body too, and a new seed.
	res, err := h.s.IdempotencyClaim(h.ctx, &store.IdempotencyClaim{
		Scope: "POST /v1/sessions", Key: "key-2", BodySHA256: body, Seed: "seed-6", Token: "tok-6",
		ExpiresAt: at(time.Hour), CreatedAt: at(time.Second),
	}, at(time.Second))
	require.NoError(t, err)
	require.NotNil(t, res.Claimed)
	require.NoError(t, h.s.IdempotencyRelease(h.ctx, "POST /v1/sessions", "key-2", "tok-6", true, at(time.Second)))
	res, err = h.s.IdempotencyClaim(h.ctx, &store.IdempotencyClaim{
		Scope: "POST /v1/sessions", Key: "key-2", BodySHA256: otherBody, Seed: "seed-7", Token: "tok-7",
		ExpiresAt: at(time.Hour), CreatedAt: at(2 * time.Second),
	}, at(2*time.Second))
	require.NoError(t, err)
	require.NotNil(t, res.Claimed)
	require.Equal(t, "seed-7", res.Claimed.Seed)

	_, err = h.s.IdempotencyClaim(h.ctx, &store.IdempotencyClaim{Scope: "POST /v1/sessions", Key: "key-3", BodySHA256: body, Token: "tok"}, at(0))
	require.ErrorContains(t, err, "seed")
}

// testIdempotencyPrune: a prune deletes the records created before its
// time and the claims that lapsed before it, more than one batch of them,
// and nothing younger; a live claim is kept whatever its age. A key pruned
// is free again: its next run makes anew, with a seed of its own.
func testIdempotencyPrune(t *testing.T, h *harness) {
	body := sha([]byte(`{}`))
	const scope = "POST /v1/sessions"
	record := func(key string, created time.Duration) {
		t.Helper()
		require.NoError(t, h.s.IdempotencyPut(h.ctx, &store.IdempotencyRow{
			Scope: scope, Key: key, BodySHA256: body, Status: 201, Response: []byte(`{"id":"` + key + `"}`), CreatedAt: at(created),
		}))
	}
	claim := func(key, token string, now, expires time.Duration) *store.IdempotencyClaimResult {
		t.Helper()
		res, err := h.s.IdempotencyClaim(h.ctx, &store.IdempotencyClaim{
			Scope: scope, Key: key, BodySHA256: body, Seed: "seed-" + token, Token: token, Owner: "node-a",
			ExpiresAt: at(expires), CreatedAt: at(now),
		}, at(now))
		require.NoError(t, err)
		return res
	}
	// More old records than a batch of either driver deletes at once.
	const old = 1203
	for i := range old {
		record(fmt.Sprintf("old-%d", i), time.Second)
	}
	record("young", time.Hour)
	require.NotNil(t, claim("lapsed", "tok-1", time.Second, time.Minute).Claimed)
	require.NoError(t, h.s.IdempotencyRelease(h.ctx, scope, "lapsed", "tok-1", false, at(2*time.Second)))
	require.NotNil(t, claim("live", "tok-2", time.Second, 3*time.Hour).Claimed, "claimed long ago, renewed since")

	n, err := h.s.IdempotencyPrune(h.ctx, at(30*time.Minute))
	require.NoError(t, err)
	require.Equal(t, int64(old+1), n, "every old record, and the lapsed claim")
	n, err = h.s.IdempotencyPrune(h.ctx, at(30*time.Minute))
	require.NoError(t, err)
	require.Zero(t, n, "pruned again: nothing left to delete")

	for _, key := range []string{"old-0", fmt.Sprintf("old-%d", old-1)} {
		_, err = h.s.IdempotencyGet(h.ctx, scope, key)
		require.ErrorIs(t, err, store.ErrNotFound, key)
	}
	got, err := h.s.IdempotencyGet(h.ctx, scope, "young")
	require.NoError(t, err)
	require.Equal(t, `{"id":"young"}`, string(got.Response))
	held := claim("live", "tok-3", 40*time.Minute, time.Hour)
	require.NotNil(t, held.Held, "the live claim is kept")
	require.Equal(t, "tok-2", held.Held.Token)

	// A pruned key runs anew: its record and its lapsed claim are gone,
	// so its next run claims it with a seed of its own.
	again := claim("old-0", "tok-4", 40*time.Minute, time.Hour)
	require.NotNil(t, again.Claimed)
	require.Equal(t, "seed-tok-4", again.Claimed.Seed)
	fresh := claim("lapsed", "tok-5", 40*time.Minute, time.Hour)
	require.NotNil(t, fresh.Claimed)
	require.Equal(t, "seed-tok-5", fresh.Claimed.Seed, "not the lapsed claim's seed")

	_, err = h.s.IdempotencyPrune(h.ctx, time.Time{})
	require.ErrorContains(t, err, "before")
}

// testIdempotencyClaimOnce: runs claiming one key at once, and runs
// claiming it while its response is recorded, are told apart: one claims,
// the others meet its claim or its response.
func testIdempotencyClaimOnce(t *testing.T, h *harness) {
	body := sha([]byte(`{}`))
	for round := range 10 {
		key := fmt.Sprintf("key-%d", round)
		const runs = 8
		results := make([]*store.IdempotencyClaimResult, runs)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tok := fmt.Sprintf("tok-%d", i)
				res, err := h.s.IdempotencyClaim(h.ctx, &store.IdempotencyClaim{
					Scope: "POST /v1/sessions", Key: key, BodySHA256: body, Seed: "seed-" + tok, Token: tok,
					ExpiresAt: at(time.Hour), CreatedAt: at(time.Second),
				}, at(time.Second))
				if !assert.NoError(t, err) {
					return
				}
				results[i] = res
				if res.Claimed != nil && i%2 == 0 {
					// Answered at once: the others claiming still meet
					// its response, never a free key.
					assert.NoError(t, h.s.IdempotencyPut(h.ctx, &store.IdempotencyRow{
						Scope: "POST /v1/sessions", Key: key, BodySHA256: body, Status: 201, Response: []byte(`{}`), CreatedAt: at(time.Second),
					}))
				}
			}()
		}
		wg.Wait()
		claimed := 0
		for _, res := range results {
			require.NotNil(t, res)
			if res.Claimed != nil {
				claimed++
			}
		}
		require.Equal(t, 1, claimed, "round %d: one run claims the key", round)
	}
}
