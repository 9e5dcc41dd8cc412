package metrics

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// fakeStore answers the calls the decorator wraps; the nil embedded Store
// makes any other call panic, which fails the test.
type fakeStore struct {
	store.Store
	err    error
	leases []store.Lease
	blobs  map[string][]byte
	counts map[string]int64
	stats  []store.ActionTypeStats
}

func (f *fakeStore) EventAppend(_ context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	if f.err != nil {
		return nil, f.err
	}
	return stored(p.SessionID, p.Events), nil
}

func (f *fakeStore) SessionCreate(_ context.Context, p *store.SessionCreateParams) ([]store.Event, error) {
	if f.err != nil {
		return nil, f.err
	}
	return stored(p.Session.ID, p.Events), nil
}

func (f *fakeStore) LeaseClaim(context.Context, *store.LeaseClaimParams) ([]store.Lease, error) {
	return f.leases, f.err
}

func (f *fakeStore) WebhookRecordAttempt(context.Context, *store.WebhookAttemptParams) error {
	return f.err
}

func (f *fakeStore) BlobGet(_ context.Context, sha string) ([]byte, error) {
	if b, ok := f.blobs[sha]; ok {
		return b, nil
	}
	return nil, store.ErrNotFound
}

func (f *fakeStore) SessionCountByStatus(context.Context) (map[string]int64, error) {
	return f.counts, f.err
}

func (f *fakeStore) ActionPendingStats(context.Context) ([]store.ActionTypeStats, error) {
	return f.stats, f.err
}

func stored(id string, evs []store.NewEvent) []store.Event {
	out := make([]store.Event, len(evs))
	for i, e := range evs {
		out[i] = store.Event{SessionID: id, Seq: int64(i + 1), Type: e.Type, Time: e.Time, Data: e.Data}
	}
	return out
}

func ev(t *testing.T, typ string, data any) store.NewEvent {
	t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	return store.NewEvent{Type: typ, Time: time.Unix(1, 0), Data: raw}
}

func newTest(t *testing.T, f *fakeStore) (*Metrics, store.Store) {
	t.Helper()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m := New(f, &Config{Now: func() time.Time { at = at.Add(3 * time.Millisecond); return at }, Logger: slog.New(slog.DiscardHandler), MaxLabelValues: 3})
	return m, m.Wrap(f)
}

// histogram returns the count and the sum of one series of h.
func histogram(t *testing.T, h *prometheus.HistogramVec, labels ...string) (uint64, float64) {
	t.Helper()
	o, err := h.GetMetricWithLabelValues(labels...)
	require.NoError(t, err)
	var m dto.Metric
	require.NoError(t, o.(prometheus.Metric).Write(&m))
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func hist(t *testing.T, h *prometheus.HistogramVec, labels ...string) uint64 {
	t.Helper()
	n, _ := histogram(t, h, labels...)
	return n
}

func TestAppendOutcomes(t *testing.T) {
	t.Parallel()
	f := &fakeStore{}
	m, st := newTest(t, f)
	ctx := t.Context()
	responded := func() *store.EventAppendParams {
		return &store.EventAppendParams{SessionID: "ses_1", Events: []store.NewEvent{
			ev(t, lt.EventModelResponded, lt.ModelRespondedData{Step: 1, CostUSD: 0.5, DurationMS: 1500,
				Usage: lt.Usage{InputTokens: 10, CachedInputTokens: 4, OutputTokens: 3, ReasoningTokens: 1}}),
		}}
	}
	for _, tc := range []struct {
		err     error
		outcome string
	}{
		{nil, "ok"},
		{fmt.Errorf("append: %w", store.ErrConflict), "conflict"},
		{fmt.Errorf("append: %w", store.ErrLeaseLost), "lease_lost"},
		{store.ErrClosed, "error"},
	} {
		f.err = tc.err
		_, err := st.EventAppend(ctx, responded())
		require.ErrorIs(t, err, tc.err)
		require.Equal(t, uint64(1), hist(t, m.appendLatency, "append", tc.outcome), tc.outcome)
	}
	_, sum := histogram(t, m.appendLatency, "append", "ok")
	require.InDelta(t, 0.003, sum, 1e-9, "the latency is measured with the configured clock")
	// Only the committed append counted its event; the request was not
	// seen, so its provider is unknown and the response names the model.
	require.Equal(t, 1.0, testutil.ToFloat64(m.steps))
	require.Equal(t, uint64(1), hist(t, m.modelDuration, "unknown", "unknown", "ok"))
	for kind, n := range map[string]float64{"input": 10, "cached_input": 4, "output": 3, "reasoning": 1} {
		require.Equal(t, n, testutil.ToFloat64(m.tokens.WithLabelValues(kind, "unknown", "unknown")), kind)
	}
	require.Equal(t, 0.5, testutil.ToFloat64(m.cost.WithLabelValues("unknown", "unknown")))
}

func TestModelCallsAndBlobs(t *testing.T) {
	t.Parallel()
	big := lt.ModelRespondedData{Step: 1, Model: "gpt-x-2030", CostUSD: 0.25, Usage: lt.Usage{InputTokens: 7}}
	bigRaw, err := json.Marshal(big)
	require.NoError(t, err)
	sum := sha256.Sum256(bigRaw)
	digest := hex.EncodeToString(sum[:])
	stub := func() store.NewEvent {
		return ev(t, lt.EventModelResponded, lt.BlobData{Blob: lt.BlobRef{SHA256: digest, Size: int64(len(bigRaw))}, Preview: "{"})
	}
	f := &fakeStore{blobs: map[string][]byte{}}
	m, st := newTest(t, f)
	ctx := t.Context()
	request := func(id string) {
		_, err := st.EventAppend(ctx, &store.EventAppendParams{SessionID: id, Events: []store.NewEvent{
			ev(t, lt.EventModelRequested, lt.ModelRequestedData{Provider: "openai", Model: "gpt-x"}),
		}})
		require.NoError(t, err)
	}

	// A payload moved to a blob is read from the blobs written with it.
	request("ses_1")
	_, err = st.EventAppend(ctx, &store.EventAppendParams{SessionID: "ses_1", Events: []store.NewEvent{stub()},
		Blobs: []store.BlobWrite{{SHA256: digest, Data: bigRaw}}})
	require.NoError(t, err)
	require.Equal(t, 0.25, testutil.ToFloat64(m.cost.WithLabelValues("openai", "gpt-x")), "the request named the model")
	// Or, when the blob was stored before, from the store.
	f.blobs[digest] = bigRaw
	request("ses_2")
	_, err = st.EventAppend(ctx, &store.EventAppendParams{SessionID: "ses_2", Events: []store.NewEvent{stub()}})
	require.NoError(t, err)
	require.Equal(t, 0.5, testutil.ToFloat64(m.cost.WithLabelValues("openai", "gpt-x")))
	// A payload that cannot be read is skipped, and the write succeeds.
	delete(f.blobs, digest)
	_, err = st.EventAppend(ctx, &store.EventAppendParams{SessionID: "ses_3", Events: []store.NewEvent{stub()}})
	require.NoError(t, err)
	require.Equal(t, 2.0, testutil.ToFloat64(m.steps))

	// A failure retried counts a retry of its model; compaction and
	// acceptance checks are model calls too.
	request("ses_4")
	_, err = st.EventAppend(ctx, &store.EventAppendParams{SessionID: "ses_4", Events: []store.NewEvent{
		ev(t, lt.EventModelFailed, lt.ModelFailedData{Retry: true, DurationMS: 20}),
		ev(t, lt.EventModelRequested, lt.ModelRequestedData{Provider: "openai", Model: "gpt-x", Purpose: lt.PurposeCompaction}),
		ev(t, lt.EventContextCompacted, lt.ContextCompactedData{CostUSD: 0.125, Usage: lt.Usage{InputTokens: 50}}),
		ev(t, lt.EventModelRequested, lt.ModelRequestedData{Provider: "openai", Model: "gpt-x", Purpose: lt.PurposeVerification}),
		ev(t, lt.EventAcceptanceVerified, lt.AcceptanceVerifiedData{CostUSD: 0.125}),
	}})
	require.NoError(t, err)
	require.Equal(t, 1.0, testutil.ToFloat64(m.retries.WithLabelValues("model", "gpt-x")))
	require.Equal(t, uint64(1), hist(t, m.modelDuration, "openai", "gpt-x", "error"))
	require.Equal(t, uint64(4), hist(t, m.modelDuration, "openai", "gpt-x", "ok"))
	require.Equal(t, 0.75, testutil.ToFloat64(m.cost.WithLabelValues("openai", "gpt-x")))
	require.Equal(t, 2.0, testutil.ToFloat64(m.steps), "compactions and checks are not steps")
}

func TestToolsForksLeasesWebhooks(t *testing.T) {
	t.Parallel()
	f := &fakeStore{}
	m, st := newTest(t, f)
	ctx := t.Context()

	// Tool calls: refused ones and ones a person resolved never ran.
	_, err := st.EventAppend(ctx, &store.EventAppendParams{SessionID: "ses_1", Events: []store.NewEvent{
		ev(t, lt.EventToolCompleted, lt.ToolCompletedData{Tool: "shell", DurationMS: 2000}),
		ev(t, lt.EventToolFailed, lt.ToolFailedData{Tool: "http_request", Retry: true, DurationMS: 30}),
		ev(t, lt.EventToolFailed, lt.ToolFailedData{Tool: "send_email", Refused: lt.RefusedPolicy}),
		ev(t, lt.EventToolCompleted, lt.ToolCompletedData{Tool: "send_email", Resolution: lt.DecisionHappened}),
		ev(t, lt.EventToolCompleted, lt.ToolCompletedData{Tool: "third"}),
		ev(t, lt.EventToolCompleted, lt.ToolCompletedData{Tool: "fourth_is_other"}),
		{Type: lt.EventToolCompleted, Data: json.RawMessage(`{"tool": 5}`)},
	}})
	require.NoError(t, err)
	require.Equal(t, uint64(1), hist(t, m.toolDuration, "shell", "ok"))
	require.Equal(t, uint64(1), hist(t, m.toolDuration, "http_request", "error"))
	require.Equal(t, 1.0, testutil.ToFloat64(m.retries.WithLabelValues("tool", "http_request")))
	require.Equal(t, uint64(0), hist(t, m.toolDuration, "send_email", "ok"))
	require.Equal(t, uint64(0), hist(t, m.toolDuration, "send_email", "error"))
	require.Equal(t, uint64(1), hist(t, m.toolDuration, "third", "ok"))
	require.Equal(t, uint64(1), hist(t, m.toolDuration, "other", "ok"), "past three tool names, the label says other")

	// A fork's copied prefix is not counted again.
	_, err = st.SessionCreate(ctx, &store.SessionCreateParams{Session: store.SessionRow{ID: "ses_fork"}, Events: []store.NewEvent{
		ev(t, lt.EventModelResponded, lt.ModelRespondedData{Step: 1}),
		ev(t, lt.EventSessionForked, lt.SessionForkedData{}),
		ev(t, lt.EventModelResponded, lt.ModelRespondedData{Step: 2}),
	}})
	require.NoError(t, err)
	require.Equal(t, 1.0, testutil.ToFloat64(m.steps))
	require.Equal(t, uint64(1), hist(t, m.appendLatency, "create", "ok"))

	// Claims that took a lease over.
	f.leases = []store.Lease{{SessionID: "a", Owner: "me"}, {SessionID: "b", Owner: "me", PreviousOwner: "dead"}, {SessionID: "c", Owner: "me", PreviousOwner: "me"}}
	_, err = st.LeaseClaim(ctx, &store.LeaseClaimParams{})
	require.NoError(t, err)
	require.Equal(t, 2.0, testutil.ToFloat64(m.takeovers))

	// Webhook attempts by outcome; a refused record counts nothing.
	for _, p := range []store.WebhookAttemptParams{
		{Status: store.WebhookDelivered},
		{Status: store.WebhookPending},
		{Status: store.WebhookPending},
		{Status: store.WebhookFailed},
		{Status: store.WebhookDisabled, DisableTarget: true},
	} {
		require.NoError(t, st.WebhookRecordAttempt(ctx, &p))
	}
	f.err = store.ErrLeaseLost
	require.ErrorIs(t, st.WebhookRecordAttempt(ctx, &store.WebhookAttemptParams{Status: store.WebhookDelivered}), store.ErrLeaseLost)
	for outcome, n := range map[string]float64{"delivered": 1, "retry": 2, "failed": 1, "disabled": 1} {
		require.Equal(t, n, testutil.ToFloat64(m.webhooks.WithLabelValues(outcome)), outcome)
	}
}

func TestStateGauges(t *testing.T) {
	t.Parallel()
	f := &fakeStore{
		counts: map[string]int64{"idle": 4, "archived": 1},
		stats:  []store.ActionTypeStats{{Type: "input", Count: 2, OldestCreatedAt: time.Date(2029, 12, 31, 23, 0, 0, 0, time.UTC)}, {Type: "", Count: 1}},
	}
	m, _ := newTest(t, f)
	require.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP longhaul_sessions Sessions by status, in the whole deployment (read from the store at scrape time; every node reports the same).
# TYPE longhaul_sessions gauge
longhaul_sessions{status="archived"} 1
longhaul_sessions{status="cancelled"} 0
longhaul_sessions{status="failed"} 0
longhaul_sessions{status="idle"} 4
longhaul_sessions{status="paused"} 0
longhaul_sessions{status="queued"} 0
longhaul_sessions{status="requires_action"} 0
longhaul_sessions{status="running"} 0
longhaul_sessions{status="waiting"} 0
`), "longhaul_sessions"))
	fams, err := m.Registry().Gather()
	require.NoError(t, err)
	ages := map[string]float64{}
	pending := map[string]float64{}
	for _, fam := range fams {
		for _, mt := range fam.GetMetric() {
			switch fam.GetName() {
			case "longhaul_required_action_oldest_age_seconds":
				ages[mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
			case "longhaul_required_actions_pending":
				pending[mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
			}
		}
	}
	require.Equal(t, map[string]float64{"approval": 0, "function_call": 0, "input": 2, "in_doubt": 0, "budget": 0, "environment_connection": 0, "browser_permission": 0, "monitor": 0, "unknown": 1}, pending)
	require.InDelta(t, 3600, ages["input"], 1, "an hour before the clock's now")
	require.Zero(t, ages["approval"])

	// A store that fails: the other metrics are still served.
	f.err = store.ErrClosed
	_, err = m.Registry().Gather()
	require.ErrorContains(t, err, "store closed")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "longhaul_steps_total 0")
	require.NotContains(t, rec.Body.String(), "longhaul_sessions{")
}

func TestLabelLimitAndInflight(t *testing.T) {
	t.Parallel()
	l := newLabelLimit(2)
	require.Equal(t, "a", l.value("a"))
	require.Equal(t, "b", l.value("b"))
	require.Equal(t, labelOther, l.value("c"))
	require.Equal(t, "a", l.value("a"), "a value seen before keeps its name")
	require.Equal(t, labelUnknown, l.value(""))

	f := newInflight(2)
	f.start("s1", modelRef{"p", "m1"})
	f.start("s2", modelRef{"p", "m2"})
	f.start("s2", modelRef{"p", "m3"})
	require.Len(t, f.calls, 2, "a session's new request replaces its old one")
	f.start("s3", modelRef{"p", "m4"})
	require.Len(t, f.calls, 2, "past max, one is dropped")
	ref, ok := f.end("s3")
	require.True(t, ok)
	require.Equal(t, modelRef{"p", "m4"}, ref)
	_, ok = f.end("s3")
	require.False(t, ok)
}
