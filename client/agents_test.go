package client

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// fakeAgents is an agent registry behind GET and POST /v1/agents: the
// latest version of one agent, as the server stores it.
type fakeAgents struct {
	mu     sync.Mutex
	latest *lt.Agent
}

func (f *fakeAgents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/agents/writer":
		if f.latest == nil {
			writeAPIError(w, http.StatusNotFound, lt.CodeNotFound, "no agent writer")
			return
		}
		writeJSON(w, http.StatusOK, f.latest)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/agents":
		var req lt.PutAgentRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeAPIError(w, http.StatusBadRequest, lt.CodeInvalidRequest, err.Error())
			return
		}
		v := 1
		if f.latest != nil {
			v = f.latest.Version + 1
		}
		f.latest = &lt.Agent{Name: req.Name, Version: v, Spec: req.Spec}
		writeJSON(w, http.StatusCreated, f.latest)
	default:
		writeAPIError(w, http.StatusNotFound, lt.CodeNotFound, "no route")
	}
}

func TestEnsureAgent(t *testing.T) {
	t.Parallel()
	reg := new(fakeAgents)
	var rc *recorder
	rc = newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		r.Body = io.NopCloser(strings.NewReader(rc.all()[n].body)) // the recorder read it
		reg.ServeHTTP(w, r)
	})
	c, _ := newTestClient(t, startServer(t, rc).URL, nil)
	spec := func(script string) lt.AgentSpec {
		return lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(script)}}
	}

	a, wrote, err := c.EnsureAgent(t.Context(), &lt.PutAgentRequest{Name: "writer", Spec: spec(`[{"text":"a","usage":{"input_tokens":1}}]`)})
	require.NoError(t, err)
	require.True(t, wrote, "an unknown agent is created")
	require.Equal(t, 1, a.Version)

	a, wrote, err = c.EnsureAgent(t.Context(), &lt.PutAgentRequest{Name: "writer", Spec: spec(`[ {"usage": {"input_tokens": 1}, "text": "a"} ]`)})
	require.NoError(t, err)
	require.False(t, wrote, "the same spec, spelled differently")
	require.Equal(t, 1, a.Version)

	a, wrote, err = c.EnsureAgent(t.Context(), &lt.PutAgentRequest{Name: "writer", Spec: spec(`[{"text":"b"}]`)})
	require.NoError(t, err)
	require.True(t, wrote, "a changed spec is a new version")
	require.Equal(t, 2, a.Version)

	var calls []string
	for _, r := range rc.all() {
		calls = append(calls, r.method+" "+r.path)
	}
	require.Equal(t, []string{
		"GET /v1/agents/writer", "POST /v1/agents",
		"GET /v1/agents/writer",
		"GET /v1/agents/writer", "POST /v1/agents",
	}, calls)

	_, _, err = c.EnsureAgent(t.Context(), nil)
	require.EqualError(t, err, "ensure agent: req is nil")
}

// TestEnsureAgentFailures: a failure of the GetAgent or PutAgent it makes
// comes back as that call's error; a missing agent is not a failure.
func TestEnsureAgentFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		getStatus int
		getCode   string
		wantCode  string
		wantText  string
		wantCalls int
	}{
		{"read refused", http.StatusForbidden, lt.CodeForbidden, lt.CodeForbidden, "get agent writer: ", 1},
		{"write refused", http.StatusNotFound, lt.CodeNotFound, lt.CodeInvalidRequest, "put agent writer: ", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					writeAPIError(w, tc.getStatus, tc.getCode, "no")
					return
				}
				writeAPIError(w, http.StatusBadRequest, lt.CodeInvalidRequest, "bad spec")
			})
			c, _ := newTestClient(t, startServer(t, rc).URL, nil)
			a, wrote, err := c.EnsureAgent(t.Context(), &lt.PutAgentRequest{Name: "writer"})
			require.Nil(t, a)
			require.False(t, wrote)
			require.True(t, HasCode(err, tc.wantCode), "%v", err)
			require.ErrorContains(t, err, tc.wantText)
			require.Len(t, rc.all(), tc.wantCalls)
		})
	}
}
