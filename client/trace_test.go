package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestSessionTrace(t *testing.T) {
	t.Parallel()
	end := testTime.Add(1500)
	parent := "turn_1"
	want := &lt.Trace{
		SessionID: "ses_1", Agent: lt.AgentRef{Name: "researcher", Version: 3}, LastEventSeq: 9, AsOf: end,
		Usage: lt.Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.01, ModelCalls: 1},
		Spans: []lt.Span{{
			ID: "turn_1", Kind: lt.SpanTurn, Name: "turn 1", Start: testTime, End: &end, Status: lt.SpanOK,
			Usage:      &lt.Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.01, ModelCalls: 1},
			Attributes: lt.SpanAttributes{TurnID: "turn_1", TurnIndex: 1},
			Children: []lt.Span{{
				ID: "turn_1/step/1", ParentID: &parent, Kind: lt.SpanStep, Name: "step 1", Start: testTime, End: &end,
				Status: lt.SpanOK, Attributes: lt.SpanAttributes{TurnID: "turn_1", Step: 1}, Children: []lt.Span{},
			}},
		}},
	}
	var (
		mu       sync.Mutex
		requests []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(want)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, &Config{HTTPClient: ownTransport(t)})
	require.NoError(t, err)
	ctx := context.Background()

	got, err := c.SessionTrace(ctx, "ses_1", false)
	require.NoError(t, err)
	require.Equal(t, want, got)
	_, err = c.SessionTrace(ctx, "ses_1", true)
	require.NoError(t, err)
	mu.Lock()
	require.Equal(t, []string{"GET /v1/sessions/ses_1/trace", "GET /v1/sessions/ses_1/trace?include=subagents"}, requests)
	mu.Unlock()

	_, err = c.SessionTrace(ctx, "", false)
	require.ErrorContains(t, err, "id is empty")
}
