package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestOTLPSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		flag string
		env  map[string]string
		want *otlpSettings
		err  string
	}{
		{name: "off by default"},
		{name: "flag", flag: "http://collector:4318", want: &otlpSettings{endpoint: "http://collector:4318"}},
		{name: "endpoint variable", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: &otlpSettings{}},
		{name: "traces endpoint variable and grpc",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: &otlpSettings{protocol: "grpc"}},
		{name: "the traces protocol wins",
			flag: "http://c:4318",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			want: &otlpSettings{endpoint: "http://c:4318", protocol: "http/json"}},
		{name: "SDK disabled", flag: "http://c:4318", env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "no otlp exporter", flag: "http://c:4318", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "bad flag", flag: "collector:4318", err: "--otlp-endpoint"},
		{name: "bad protocol", flag: "http://c:4318", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "udp"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cli{getenv: func(k string) string { return tc.env[k] }}
			got, err := c.otlpFromEnv(tc.flag)
			if tc.err != "" {
				var ue *usageError
				require.ErrorAs(t, err, &ue)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestServeExportsTracesOverOTLP: serve --otlp-endpoint sends each turn to
// the collector as one trace, over the OTLP/HTTP protocol.
func TestServeExportsTracesOverOTLP(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		names []string
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path == "/v1/traces" && proto.Unmarshal(body, &req) == nil {
			mu.Lock()
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						names = append(names, s.Name)
					}
				}
			}
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(collector.Close)

	n := startServe(t, noEnv, "--data", t.TempDir(), "--otlp-endpoint", collector.URL)
	cl, err := client.New(n.url, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := cl.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Name: "demo", Script: json.RawMessage(`[{"text": "hello"}]`)}},
		Input:     "hi",
	})
	require.NoError(t, err)
	for ev, err := range cl.StreamEvents(ctx, s.ID, 0) {
		require.NoError(t, err)
		if ev.Type == lt.EventTurnCompleted {
			break
		}
	}
	deadline := time.Now().Add(testTimeout)
	for {
		mu.Lock()
		got := append([]string(nil), names...)
		mu.Unlock()
		if len(got) > 0 {
			require.ElementsMatch(t, []string{"invoke_agent inline", "step 1", "chat demo"}, got)
			break
		}
		require.True(t, time.Now().Before(deadline), "no trace reached the collector")
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	require.NoError(t, n.stop())
}
