package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
)

func TestTimesAreMicrosecondsUTC(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	loc := time.FixedZone("UTC+5", 5*3600)
	local := time.Date(2025, 1, 2, 8, 4, 5, 123456789, loc) // nanoseconds are truncated
	want := time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC)
	events, err := s.SessionCreate(t.Context(), &store.SessionCreateParams{
		Session: store.SessionRow{ID: "ses_t", AgentName: "a", AgentVersion: 1, Status: "queued", WakeAt: &local, CreatedAt: local},
		Events:  []store.NewEvent{{Type: "session.created", Time: local}},
	})
	require.NoError(t, err)
	require.Equal(t, want, events[0].Time, "returned events are what is stored")
	row, err := s.SessionGet(t.Context(), "ses_t")
	require.NoError(t, err)
	require.Equal(t, want, row.CreatedAt)
	require.Equal(t, want, row.UpdatedAt, "a zero UpdatedAt is CreatedAt")
	require.Equal(t, want, *row.WakeAt)
	stored, err := s.EventList(t.Context(), "ses_t", 0, 1)
	require.NoError(t, err)
	require.Equal(t, want, stored[0].Time)
	require.Nil(t, stored[0].Data, "empty data is stored as NULL and read back as nil")
}

// TestJSONVerbatim: documents come back byte for byte (key order, spacing,
// number spelling), and a \u0000 escape, which JSONB refuses, is stored,
// listed in the inbox and read back.
func TestJSONVerbatim(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	createSession(t, s, "ses_j", false)
	data := json.RawMessage(`{"z": 1, "a":[1.50e1, "x\u0000y"],  "nested" : {"b":2,"a":1}}`)
	action := json.RawMessage(`{"output":"bin\u0000ary","type":"approval" , "id":"act_j"}`)
	p := appendParams("ses_j", 1, 1)
	p.Events[0].Data = data
	p.State = data
	p.Docs = []store.DocWrite{{Kind: store.DocAction, ID: "act_j", Status: "pending", Doc: action, CreatedAt: testTime}}
	_, err := s.EventAppend(t.Context(), p)
	require.NoError(t, err)

	events, err := s.EventList(t.Context(), "ses_j", 1, 1)
	require.NoError(t, err)
	require.Equal(t, string(data), string(events[0].Data))
	row, err := s.SessionGet(t.Context(), "ses_j")
	require.NoError(t, err)
	require.Equal(t, string(data), string(row.State))
	inbox, err := s.ActionListAll(t.Context(), &store.ActionListParams{Type: "approval"})
	require.NoError(t, err)
	require.Len(t, inbox, 1)
	require.Equal(t, string(action), string(inbox[0].Doc))
}

func TestDocType(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]any{
		`{"type":"approval"}`:          "approval",
		`{"a":"\u0000","type":"x\"y"}`: `x"y`,
		`{"type":3}`:                   nil,
		`{"type":null}`:                nil,
		`["type"]`:                     nil,
		`"approval"`:                   nil,
		`{}`:                           nil,
		``:                             nil,
		`{"type":"nul\u0000"}`:         nil,
	} {
		require.Equal(t, want, docType(json.RawMessage(doc)), doc)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	ctx := t.Context()
	createSession(t, s, "ses_v", false)
	badDigest := strings.Repeat("ab", 32)

	withAppend := func(mod func(p *store.EventAppendParams)) func() error {
		return func() error {
			p := appendParams("ses_v", 1, 1)
			mod(p)
			_, err := s.EventAppend(ctx, p)
			return err
		}
	}
	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		{"no events", withAppend(func(p *store.EventAppendParams) { p.Events = nil }), "events"},
		{"bad event json", withAppend(func(p *store.EventAppendParams) { p.Events[0].Data = json.RawMessage(`{`) }), "events[0].data"},
		{"event json not utf-8", withAppend(func(p *store.EventAppendParams) { p.Events[0].Data = json.RawMessage("\"\xff\"") }), "events[0].data"},
		{"zero event time", withAppend(func(p *store.EventAppendParams) { p.Events[0].Time = time.Time{} }), "events[0].time"},
		{"empty event type", withAppend(func(p *store.EventAppendParams) { p.Events[0].Type = "" }), "events[0].type"},
		{"NUL in turn id", withAppend(func(p *store.EventAppendParams) { p.Events[0].TurnID = "t\x00" }), "events[0].turn_id"},
		{"empty status", withAppend(func(p *store.EventAppendParams) { p.Status = "" }), "status"},
		{"bad state json", withAppend(func(p *store.EventAppendParams) { p.State = json.RawMessage(`nope`) }), "state"},
		{"NUL in state json", withAppend(func(p *store.EventAppendParams) { p.State = json.RawMessage("\"a\x00\"") }), "state"},
		{"bad doc json", withAppend(func(p *store.EventAppendParams) {
			p.Docs = []store.DocWrite{{Kind: store.DocEffect, ID: "e", Doc: json.RawMessage(`{"a":}`), CreatedAt: testTime}}
		}), "docs[0].doc"},
		{"bad json and a stale seq", withAppend(func(p *store.EventAppendParams) {
			p.ExpectedSeq = 0
			p.Events[0].Data = json.RawMessage(`[1,]`)
		}), "events[0].data"},
		{"bad json before an empty status", withAppend(func(p *store.EventAppendParams) {
			p.Events[0].Data = json.RawMessage(`{`)
			p.Status = ""
		}), "events[0].data"},
		{"bad json and a lost lease", withAppend(func(p *store.EventAppendParams) {
			p.Fence = &store.Lease{SessionID: "ses_v", Owner: "nobody", Epoch: 9}
			p.State = json.RawMessage(`{"a":1}x`)
		}), "state"},
		{"json nested deeper than encoding/json reads", withAppend(func(p *store.EventAppendParams) {
			p.Events[0].Data = json.RawMessage(strings.Repeat("[", 10001) + strings.Repeat("]", 10001))
		}), "events[0].data"},
		{"negative seq", withAppend(func(p *store.EventAppendParams) { p.ExpectedSeq = -1 }), "expected_seq"},
		{"fence without owner", withAppend(func(p *store.EventAppendParams) { p.Fence = &store.Lease{Epoch: 1} }), "fence.owner"},
		{"blob digest mismatch", withAppend(func(p *store.EventAppendParams) {
			p.Blobs = []store.BlobWrite{{SHA256: badDigest, Data: []byte("x")}}
		}), "blobs[0].sha256"},
		{"unknown doc kind", withAppend(func(p *store.EventAppendParams) {
			p.Docs = []store.DocWrite{{Kind: "widget", ID: "w", CreatedAt: testTime}}
		}), "docs[0].kind"},
		{"doc of another session", withAppend(func(p *store.EventAppendParams) {
			p.Docs = []store.DocWrite{{Kind: store.DocTurn, ID: "t", SessionID: "ses_other", CreatedAt: testTime}}
		}), "docs[0].session_id"},
		{"session without id", func() error {
			_, err := s.SessionCreate(ctx, &store.SessionCreateParams{Session: store.SessionRow{AgentName: "a", AgentVersion: 1, Status: "q", CreatedAt: testTime}})
			return err
		}, "session.id"},
		{"agent version 0", func() error {
			_, err := s.AgentInsert(ctx, &store.AgentInsertParams{Project: "default", Name: "a", Version: 0, CreatedAt: testTime})
			return err
		}, "version"},
		{"claim limit 0", func() error {
			_, err := s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "w", Now: testTime, ExpiresAt: testTime.Add(time.Second)})
			return err
		}, "limit"},
		{"claim expiring before now", func() error {
			_, err := s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "w", Now: testTime, ExpiresAt: testTime, Limit: 1})
			return err
		}, "expires_at"},
		{"renew epoch 0", func() error {
			return s.LeaseRenew(ctx, store.Lease{SessionID: "ses_v", Owner: "w"}, testTime)
		}, "lease.epoch"},
		{"blob put mismatch", func() error { return s.BlobPut(ctx, badDigest, []byte("x")) }, "sha256"},
		{"blob get uppercase", func() error {
			_, err := s.BlobGet(ctx, strings.ToUpper(badDigest))
			return err
		}, "sha256"},
		{"session list limit", func() error {
			_, err := s.SessionList(ctx, &store.SessionListParams{Limit: 5000})
			return err
		}, "limit"},
		{"event list negative after", func() error {
			_, err := s.EventList(ctx, "ses_v", -1, 10)
			return err
		}, "after_seq"},
		{"idempotency status", func() error {
			return s.IdempotencyPut(ctx, &store.IdempotencyRow{Scope: "s", Key: "k", BodySHA256: "x", Status: 42, CreatedAt: testTime})
		}, "status"},
		{"expire leases without owner", func() error {
			_, err := s.LeaseExpireOwner(ctx, "", testTime)
			return err
		}, "owner"},
		{"webhook page", func() error {
			_, err := s.WebhookDue(ctx, testTime, 5000)
			return err
		}, "limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.field)
			for _, sentinel := range []error{store.ErrNotFound, store.ErrConflict, store.ErrLeaseLost, store.ErrClosed} {
				require.NotErrorIs(t, err, sentinel, "bad input is not a %v", sentinel)
			}
		})
	}
	row, err := s.SessionGet(ctx, "ses_v")
	require.NoError(t, err)
	require.Equal(t, int64(1), row.LastSeq, "no bad input wrote anything")
}

func TestCancelledContextWritesNothing(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	createSession(t, s, "ses_c", false)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.EventAppend(ctx, appendParams("ses_c", 1, 1))
	require.ErrorIs(t, err, context.Canceled)
	row, err := s.SessionGet(t.Context(), "ses_c")
	require.NoError(t, err)
	require.Equal(t, int64(1), row.LastSeq)
}

// TestClosePendingAppendsFinish: appends racing with Close either commit
// (and say so) or return ErrClosed, never anything else.
func TestClosePendingAppendsFinish(t *testing.T) {
	t.Parallel()
	dsn := pgtest.FreshSchema(t)
	s, err := Open(t.Context(), dsn, &Config{MaxConns: 4})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	const writers = 16
	for i := range writers {
		createSession(t, s, fmt.Sprintf("ses_%d", i), false)
	}
	acked := make([]int64, writers)
	errs := make([]error, writers)
	started := make(chan struct{}, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			last := int64(1)
			for n := 0; ; n++ {
				if n == 1 {
					started <- struct{}{}
				}
				_, err := s.EventAppend(context.Background(), appendParams(fmt.Sprintf("ses_%d", i), last, 1))
				if err != nil {
					errs[i] = err
					return
				}
				last++
				acked[i] = last
			}
		})
	}
	for range writers {
		<-started
	}
	require.NoError(t, s.Close())
	wg.Wait()
	for i, err := range errs {
		require.ErrorIs(t, err, store.ErrClosed, "writer %d", i)
	}

	s = openDSN(t, dsn, nil)
	for i := range writers {
		row, err := s.SessionGet(t.Context(), fmt.Sprintf("ses_%d", i))
		require.NoError(t, err)
		require.Equal(t, acked[i], row.LastSeq, "writer %d: every acknowledged append and nothing else", i)
	}
}

// TestConcurrentAppendsAcrossNodes: writers on two nodes race on one
// session, re-reading on conflict; every event lands once, seqs stay
// gap-free, and a fenced zombie on either node is refused.
func TestConcurrentAppendsAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, nil)
	createSession(t, a, "ses_r", true)
	const each = 20
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for w, s := range []*Store{a, b, a, b} {
		wg.Go(func() {
			for i := 0; i < each; {
				row, err := s.SessionGet(context.Background(), "ses_r")
				if err != nil {
					errs[w] = err
					return
				}
				p := appendParams("ses_r", row.LastSeq, 1)
				p.Runnable = true
				p.Events[0].Data = json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				_, err = s.EventAppend(context.Background(), p)
				switch {
				case err == nil:
					i++
				case errors.Is(err, store.ErrConflict):
				default:
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	events, err := b.EventList(t.Context(), "ses_r", 0, 1000)
	require.NoError(t, err)
	require.Len(t, events, 1+4*each)
	seen := map[string]bool{}
	for i, e := range events {
		require.Equal(t, int64(i+1), e.Seq)
		if i > 0 {
			require.False(t, seen[string(e.Data)], "event %s stored twice", e.Data)
			seen[string(e.Data)] = true
		}
	}

	// Node a's worker claims; node b's takes over after expiry; a's writes
	// are refused from then on, on either node.
	now := testTime.Add(time.Hour)
	la, err := a.LeaseClaim(t.Context(), &store.LeaseClaimParams{Owner: "node-a", Now: now, ExpiresAt: now.Add(time.Minute), Limit: 1})
	require.NoError(t, err)
	require.Len(t, la, 1)
	later := now.Add(2 * time.Minute)
	lb, err := b.LeaseClaim(t.Context(), &store.LeaseClaimParams{Owner: "node-b", Now: later, ExpiresAt: later.Add(time.Minute), Limit: 1})
	require.NoError(t, err)
	require.Len(t, lb, 1)
	require.Equal(t, la[0].Epoch+1, lb[0].Epoch)
	last := int64(1 + 4*each)
	for _, s := range []*Store{a, b} {
		p := appendParams("ses_r", last, 1)
		p.Fence = &la[0]
		_, err := s.EventAppend(t.Context(), p)
		require.ErrorIs(t, err, store.ErrLeaseLost)
	}
	p := appendParams("ses_r", last, 1)
	p.Fence = &lb[0]
	_, err = a.EventAppend(t.Context(), p)
	require.NoError(t, err, "the new holder writes through any node")
}
