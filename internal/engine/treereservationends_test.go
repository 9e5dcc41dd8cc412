package engine_test

// A tree's reservations end with their calls, whatever path the call ends
// by: a reservation kept while its lease lives holds the whole tree.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// treeRouteProvider plays a root that spawns one child (with its own model
// and instructions), waits for it and answers; the child answers at once.
// Its API is api.example.com, so its calls read a model key.
type treeRouteProvider struct{ mu sync.Mutex }

func (p *treeRouteProvider) DefaultBaseURL(lt.ModelSpec) string { return planURL }

func (p *treeRouteProvider) Respond(_ context.Context, req *model.Request) (*model.Response, error) {
	usage := lt.Usage{InputTokens: 100, OutputTokens: 10}
	answers := 0
	for _, m := range req.Messages {
		if strings.Contains(m.Text, "CHILD-TASK") {
			return &model.Response{Text: "child done", Usage: usage, CostUSD: 0.01}, nil
		}
		if m.Role == model.RoleAssistant {
			answers++
		}
	}
	switch answers {
	case 0:
		return &model.Response{ToolCalls: []model.ToolCall{{ID: "c1", Name: "spawn_agent", Arguments: json.RawMessage(`{"instructions":"help","input":"CHILD-TASK"}`)}}, Usage: usage, CostUSD: 0.01}, nil
	case 1:
		return &model.Response{ToolCalls: []model.ToolCall{{ID: "c2", Name: "wait_agents", Arguments: json.RawMessage(`{}`)}}, Usage: usage, CostUSD: 0.01}, nil
	}
	return &model.Response{Text: "all done", Usage: usage, CostUSD: 0.01}, nil
}

// flakyVault fails its second read of a model key with a storage error
// (retryable: "the next attempt may read it").
type flakyVault struct {
	*fakeVault
	reads atomic.Int64
}

func (v *flakyVault) ValueFor(ctx context.Context, project, name, dest string) (string, error) {
	if v.reads.Add(1) == 2 {
		return "", errors.New("vault storage: database is locked")
	}
	return v.fakeVault.ValueFor(ctx, project, name, dest)
}

// TestTreeReservationOfAKeyReadFailureEnds: a call of a tree whose
// model key cannot be read (a transient vault error, retried) keeps its
// reservation in the tree's ledger: invoke returns before modelCallEnded,
// so the reservation is never released while the lease lives, and the
// retry (a new reservation) waits behind it.
func TestTreeReservationOfAKeyReadFailureEnds(t *testing.T) {
	h := newKeyHarness(t, &planProvider{})
	h.providers = map[string]model.Provider{"route": &treeRouteProvider{}}
	base := h.vault.(*fakeVault)
	fv := &flakyVault{fakeVault: base}
	h.vault = fv
	h.modelKeyEnv = nil
	h.restart("node-a")
	sp := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "route", Name: "m", APIKeySecret: "MODEL_KEY"}, Instructions: "Be useful.",
		Tools: []lt.ToolSpec{{Name: "spawn_agent"}, {Name: "wait_agents"}}}
	s := create(t, h, sp, &lt.Budget{MaxCostUSD: 1})

	got := waitTreeEnds(t, h, s.ID)
	require.Equal(t, lt.SessionIdle, got.Status, "journal:\n%s", journalText(t, h, s.ID))
	require.Greater(t, fv.reads.Load(), int64(2), "the failed read was made again")
}

// childAnswerDropStore loses the database under the first append of a
// sub-agent (an append that settles in a tree other than its own) that
// carries a model.responded: nothing is committed, and the worker hears
// that the database went away (a PostgreSQL restart under the write).
type childAnswerDropStore struct {
	store.Store
	dropped atomic.Bool
}

func (s *childAnswerDropStore) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	answer := false
	for _, ev := range p.Events {
		answer = answer || ev.Type == lt.EventModelResponded
	}
	child := p.TreeSettle != nil && p.TreeSettle.RootID != p.SessionID
	if !answer || !child || p.Fence == nil || !s.dropped.CompareAndSwap(false, true) {
		return s.Store.EventAppend(ctx, p)
	}
	return nil, fmt.Errorf("append events to session %s: %w: %w", p.SessionID, store.ErrUnavailable,
		errors.New("FATAL: terminating connection due to administrator command (SQLSTATE 57P01)"))
}

// TestTreeReservationOfARunnerThatStartedOverEnds: a sub-agent's worker whose
// append of a model answer is lost (the database went away; nothing
// committed) starts over under the same lease. The reservation of the call
// it made stays live in the tree's ledger (same lease owner and epoch) and
// nobody releases it: the call made again waits for it forever.
func TestTreeReservationOfARunnerThatStartedOverEnds(t *testing.T) {
	var dropping *childAnswerDropStore
	h := newHarnessThrough(t, scripted.New(nil), 0, func(h *harness) store.Store {
		dropping = &childAnswerDropStore{Store: h.store}
		return dropping
	})
	child := childSpec(script(t, childStep(0.01, 100, true), childStep(0.01, 100, false)), "read_file")
	s := create(t, h, treeRoot(t, 1, child), &lt.Budget{MaxCostUSD: 1})

	got := waitTreeEnds(t, h, s.ID)
	require.Equal(t, lt.SessionIdle, got.Status, "journal:\n%s", journalText(t, h, s.ID))
	require.True(t, dropping.dropped.Load())
}

// waitTreeEnds waits for the root of a tree to end its turn, and fails
// with the tree's ledger and journals when it does not.
func waitTreeEnds(t *testing.T, h *harness, rootID string) *lt.Session {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := h.eng.GetSession(ctx, rootID)
		require.NoError(t, err)
		if got.Status == lt.SessionIdle || got.Status == lt.SessionFailed {
			return got
		}
		if time.Now().After(deadline) {
			l, err := h.store.TreeBudgetGet(ctx, rootID)
			require.NoError(t, err)
			msg := fmt.Sprintf("the tree never finished: root %s; ledger spent %+v reserved %+v exclusive=%v\nroot journal:\n%s",
				got.Status, l.Spent, l.Reserved, l.Exclusive, journalText(t, h, rootID))
			for _, k := range children(t, h, rootID) {
				msg += fmt.Sprintf("\nchild %s (%s) journal:\n%s", k.ID, k.Status, journalText(t, h, k.ID))
			}
			t.Fatal(msg)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}
