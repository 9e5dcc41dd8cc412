package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/openapi"
)

// tourKey is the bootstrap key of the servers the OpenAPI and client tests
// start.
const tourKey = "lh_tour_bootstrap_key_0123456789"

// tourCaller sends requests through a validating proxy.
type tourCaller struct {
	t     *testing.T
	proxy *openAPIProxy
	hc    *http.Client
}

// call sends one request (body: JSON of v, or raw bytes) and returns the
// status and the body.
func (c *tourCaller) call(method, path string, v any, header ...string) (int, []byte) {
	c.t.Helper()
	var body io.Reader
	switch b := v.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(v)
		require.NoError(c.t, err)
		body = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.proxy.url+path, body)
	require.NoError(c.t, err)
	req.Header.Set("Authorization", "Bearer "+tourKey)
	if v != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.hc.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, b
}

// ok calls and requires the status, returning the decoded JSON body.
func (c *tourCaller) ok(want int, method, path string, v any, header ...string) map[string]any {
	c.t.Helper()
	status, b := c.call(method, path, v, header...)
	require.Equal(c.t, want, status, "%s %s: %s", method, path, b)
	var out map[string]any
	if len(b) > 0 && json.Valid(b) {
		_ = json.Unmarshal(b, &out)
	}
	return out
}

// waitIdle polls the session until it is idle.
func (c *tourCaller) waitStatus(id string, statuses ...string) map[string]any {
	c.t.Helper()
	var s map[string]any
	waitFor(c.t, 60*time.Second, "session "+id+" in "+strings.Join(statuses, "/"), func() (bool, error) {
		s = c.ok(http.StatusOK, "GET", "/v1/sessions/"+id, nil)
		return slices.Contains(statuses, s["status"].(string)), nil
	})
	return s
}

// pendingAction waits for a pending action of the type and returns it.
func (c *tourCaller) pendingAction(id, typ string) map[string]any {
	c.t.Helper()
	var found map[string]any
	waitFor(c.t, 60*time.Second, "a pending "+typ+" action", func() (bool, error) {
		l := c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/actions?status=pending", nil)
		for _, a := range l["data"].([]any) {
			if a := a.(map[string]any); a["type"] == typ {
				found = a
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// TestOpenAPIDescribesRealAnswers drives every route of the real binary
// through a proxy that checks each answer against the OpenAPI document
// (internal/openapi) with libopenapi-validator: sessions, turns, events,
// actions, effects, artifacts, checkpoints and their files, the workspace,
// agents, keys, secrets, webhooks, runners, reports, the audit log, and
// errors.
// Every operation the document describes must have been checked.
func TestOpenAPIDescribesRealAnswers(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--api-key", tourKey)
	proxy := newOpenAPIProxy(t, srv.url)
	c := &tourCaller{t: t, proxy: proxy, hc: &http.Client{Timeout: 30 * time.Second}}

	// Operations.
	c.ok(http.StatusOK, "GET", "/healthz", nil)
	c.ok(http.StatusOK, "GET", "/readyz", nil)
	c.ok(http.StatusOK, "GET", "/metrics", nil)
	doc := c.ok(http.StatusOK, "GET", "/v1/openapi.json", nil)
	require.Equal(t, "3.1.0", doc["openapi"])
	c.ok(http.StatusOK, "GET", "/v1/me", nil)
	c.ok(http.StatusOK, "GET", "/v1/version", nil)

	// Agents.
	spec := map[string]any{
		"model": map[string]any{"provider": "scripted", "name": "tour", "script": []any{
			map[string]any{"tool_calls": []any{map[string]any{"name": "write_file", "arguments": map[string]any{"path": "notes.md", "content": "# Notes\n"}}}},
			map[string]any{"tool_calls": []any{map[string]any{"name": "checkpoint", "arguments": map[string]any{"name": "drafted", "summary": "notes written", "next_action": "finish"}}}},
			map[string]any{"tool_calls": []any{map[string]any{"name": "send_email", "arguments": map[string]any{"to": "ceo@acme.com"}}}},
			map[string]any{"tool_calls": []any{map[string]any{"name": "finish", "arguments": map[string]any{"summary": "done", "artifacts": []any{"notes.md"}}}}},
			map[string]any{"text": "Done."},
		}},
		"instructions": "Write notes, then email the CEO.",
		"tools": []any{
			map[string]any{"name": "write_file"}, map[string]any{"name": "checkpoint"}, map[string]any{"name": "finish"},
			map[string]any{"name": "send_email", "type": "function", "effect": "irreversible",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"to": map[string]any{"type": "string"}}}},
		},
		"policies": []any{map[string]any{"tool": "send_email", "decision": "ask"}},
	}
	c.ok(http.StatusCreated, "POST", "/v1/agents", map[string]any{"name": "tour", "spec": spec})
	c.ok(http.StatusOK, "GET", "/v1/agents", nil)
	c.ok(http.StatusOK, "GET", "/v1/agents/tour", nil)
	c.ok(http.StatusOK, "GET", "/v1/agents/tour/versions", nil)

	// A session through an approval and a function call.
	s := c.ok(http.StatusCreated, "POST", "/v1/sessions", map[string]any{
		"agent": "tour", "input": "Write the notes", "goal": "notes", "metadata": map[string]any{"k": "v"},
		"budget": map[string]any{"max_cost_usd": 5, "max_tokens": 100000}, "webhook_url": "https://hooks.example.com/longhaul",
	}, "Idempotency-Key", "tour-create-1")
	id := s["id"].(string)
	approval := c.pendingAction(id, "approval")
	actionID := approval["id"].(string)
	c.ok(http.StatusOK, "GET", "/v1/actions?status=pending", nil)
	c.ok(http.StatusOK, "GET", "/v1/actions/"+actionID, nil)
	c.ok(http.StatusOK, "POST", "/v1/sessions/"+id+"/actions/"+actionID, map[string]any{"decision": "approve"})
	c.ok(http.StatusConflict, "POST", "/v1/sessions/"+id+"/actions/"+actionID, map[string]any{"decision": "reject", "reason": "changed my mind"})
	call := c.pendingAction(id, "function_call")
	c.ok(http.StatusOK, "POST", "/v1/sessions/"+id+"/actions/"+call["id"].(string), map[string]any{"output": map[string]any{"sent": true}})
	c.waitStatus(id, "idle")
	// The approval above, by its policy's rule (approval fatigue), read
	// while nothing else can ask: the fork and the next turn below may ask
	// again before the report is read.
	report := c.ok(http.StatusOK, "GET", "/v1/reports/tasks", nil)
	policies := report["totals"].(map[string]any)["policies"].([]any)
	require.Len(t, policies, 1, "%v", policies)
	rule := policies[0].(map[string]any)
	require.Equal(t, approval["policy"], rule["rule"])
	require.Equal(t, []any{1.0, 1.0, 1.0, 1.0, false}, []any{rule["asks"], rule["decided"], rule["approved"], rule["approve_rate"], rule["relax"]})
	require.NotNil(t, rule["median_decide_seconds"])
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"?include=subagents", nil)
	c.ok(http.StatusOK, "GET", "/v1/sessions?limit=5", nil)
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/actions", nil)

	// The journal and provenance.
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/events?after=0&limit=3", nil)
	streamOnce(t, proxy.url+"/v1/sessions/"+id+"/events/stream")
	effects := c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/effects", nil)
	require.NotEmpty(t, effects["data"])
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/effects/"+effects["data"].([]any)[0].(map[string]any)["id"].(string), nil)
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/trace", nil)
	turns := c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/turns", nil)
	turnID := turns["data"].([]any)[0].(map[string]any)["id"].(string)
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/turns/"+turnID, nil)
	arts := c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/artifacts", nil)
	require.NotEmpty(t, arts["data"], "finish saved notes.md as an artifact")
	art := arts["data"].([]any)[0].(map[string]any)
	c.ok(http.StatusOK, "GET", "/v1/artifacts/"+art["id"].(string), nil)
	c.ok(http.StatusOK, "GET", "/v1/artifacts/"+art["id"].(string)+"/content", nil)
	c.ok(http.StatusNotModified, "GET", "/v1/artifacts/"+art["id"].(string)+"/content", nil, "If-None-Match", `"`+art["sha256"].(string)+`"`)
	if status, _ := c.call("GET", "/v1/blobs/"+art["sha256"].(string), nil); status != http.StatusOK {
		require.Equal(t, http.StatusNotFound, status)
	}
	c.ok(http.StatusBadRequest, "GET", "/v1/blobs/not-a-digest", nil)
	cps := c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/checkpoints", nil)
	var cpID string
	for _, cp := range cps["data"].([]any) {
		if cp := cp.(map[string]any); cp["name"] == "drafted" {
			cpID = cp["id"].(string)
		}
	}
	require.NotEmpty(t, cpID, "checkpoints: %v", cps)
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/checkpoints/"+cpID+"/files", nil)
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/checkpoints/"+cpID+"/files/notes.md", nil)

	// The workspace, taken over while the session is idle.
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/files?path=.", nil)
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+id+"/files/notes.md", nil)
	c.ok(http.StatusOK, "PUT", "/v1/sessions/"+id+"/files/extra.txt", []byte("by a person\n"), "Content-Type", "application/octet-stream")
	c.ok(http.StatusOK, "DELETE", "/v1/sessions/"+id+"/files/extra.txt", nil)

	// Controls.
	c.ok(http.StatusOK, "POST", "/v1/sessions/"+id+"/review", map[string]any{"accepted": true, "note": "good"})
	c.ok(http.StatusCreated, "POST", "/v1/sessions/"+id+"/constraints", map[string]any{"constraint": "Be brief"})
	c.ok(http.StatusAccepted, "POST", "/v1/sessions/"+id+"/signals", map[string]any{"name": "deploy.finished", "payload": map[string]any{"ok": true}})
	c.ok(http.StatusOK, "PATCH", "/v1/sessions/"+id+"/budget", map[string]any{"max_cost_usd": 10})
	c.ok(http.StatusConflict, "POST", "/v1/sessions/"+id+"/steer", map[string]any{"input": "faster"})
	c.call("POST", "/v1/sessions/"+id+"/pause", map[string]any{"reason": "lunch"})
	c.waitStatus(id, "paused", "idle")
	c.call("POST", "/v1/sessions/"+id+"/resume", map[string]any{})
	c.waitStatus(id, "idle")
	c.ok(http.StatusCreated, "POST", "/v1/sessions/"+id+"/turns", map[string]any{"input": "And again"})
	c.ok(http.StatusOK, "POST", "/v1/sessions/"+id+"/cancel", map[string]any{"reason": "enough"})
	fork := c.ok(http.StatusCreated, "POST", "/v1/sessions/"+id+"/fork", map[string]any{"checkpoint_id": cpID})
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+fork["id"].(string), nil)

	// The model monitor: its pause is a monitor action carrying the
	// review, and its cost is apart in the usage and the report.
	watched := c.ok(http.StatusCreated, "POST", "/v1/sessions", map[string]any{"input": "write", "agent_spec": map[string]any{
		"model": map[string]any{"provider": "scripted", "script": []any{
			map[string]any{"tool_calls": []any{map[string]any{"name": "write_file", "arguments": map[string]any{"path": "w.md", "content": "w\n"}}}},
			map[string]any{"text": "Done."},
		}},
		"tools": []any{map[string]any{"name": "write_file"}},
		"monitor": map[string]any{"before": []any{"idempotent"}, "model": map[string]any{"provider": "scripted", "script": []any{
			map[string]any{"text": `{"verdict": "pause", "reasons": ["a write"]}`, "cost_usd": 0.01},
		}}},
	}})["id"].(string)
	paused := c.pendingAction(watched, "monitor")
	require.NotNil(t, paused["review"], "%v", paused)
	c.ok(http.StatusOK, "POST", "/v1/sessions/"+watched+"/actions/"+paused["id"].(string), map[string]any{"decision": "continue"})
	c.waitStatus(watched, "idle")
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+watched, nil)
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+watched+"/trace", nil)
	c.ok(http.StatusOK, "GET", "/v1/reports/tasks", nil)

	// Identity, the vault, webhooks, the audit log.
	key := c.ok(http.StatusCreated, "POST", "/v1/keys", map[string]any{"name": "alice", "role": "approver"})
	c.ok(http.StatusOK, "GET", "/v1/keys", nil)
	c.ok(http.StatusNoContent, "DELETE", "/v1/keys/"+key["id"].(string), nil)
	c.ok(http.StatusCreated, "PUT", "/v1/secrets/API_TOKEN", map[string]any{
		"value": "tour-secret-value", "hosts": []any{"api.example.com"},
		"inject": map[string]any{"header": "Authorization", "format": "Bearer {value}"}})
	c.ok(http.StatusOK, "PUT", "/v1/secrets/API_TOKEN", map[string]any{
		"value": "tour-secret-value-2", "hosts": []any{"api.example.com"}, "inject": map[string]any{"bearer": true}})
	c.ok(http.StatusOK, "GET", "/v1/secrets", nil)
	c.ok(http.StatusNoContent, "DELETE", "/v1/secrets/API_TOKEN", nil)
	ep := c.ok(http.StatusCreated, "POST", "/v1/webhooks/endpoints", map[string]any{"url": "https://hooks.example.com/all", "events": []any{"session.idle"}})
	c.ok(http.StatusOK, "GET", "/v1/webhooks/endpoints", nil)
	c.ok(http.StatusOK, "GET", "/v1/webhooks/deliveries", nil)
	c.ok(http.StatusNoContent, "DELETE", "/v1/webhooks/endpoints/"+ep["id"].(string), nil)
	c.ok(http.StatusOK, "GET", "/v1/audit?limit=10", nil)

	// Runners: one connected with a runner key, listed; the connection's
	// route refuses an admin's key, and a runner key's plain GET (no
	// upgrade) is a 426.
	// Before it connects, sessions whose agent asks for it wait with an
	// environment_connection action: one is stopped, the other goes on
	// once the runner connects.
	onRunner := func(runner map[string]any) string {
		s := c.ok(http.StatusCreated, "POST", "/v1/sessions", map[string]any{"input": "go", "agent_spec": map[string]any{
			"model":       map[string]any{"provider": "scripted", "script": []any{map[string]any{"text": "done"}}},
			"environment": map[string]any{"runner": runner},
		}})
		return s["id"].(string)
	}
	c.ok(http.StatusBadRequest, "POST", "/v1/sessions", map[string]any{"input": "go", "agent_spec": map[string]any{
		"model":       map[string]any{"provider": "scripted", "script": []any{map[string]any{"text": "done"}}},
		"environment": map[string]any{"runner": map[string]any{"name": "tour-box", "labels": []any{"tour"}}},
	}})
	waitsForBox := onRunner(map[string]any{"labels": []any{"tour"}})
	waitsForNobody := onRunner(map[string]any{"name": "nobody"})
	c.pendingAction(waitsForBox, "environment_connection")
	stopAct := c.pendingAction(waitsForNobody, "environment_connection")
	c.ok(http.StatusOK, "GET", "/v1/actions?type=environment_connection&status=pending", nil)
	c.ok(http.StatusBadRequest, "POST", "/v1/sessions/"+waitsForNobody+"/actions/"+stopAct["id"].(string), map[string]any{"decision": "approve"})
	c.ok(http.StatusOK, "POST", "/v1/sessions/"+waitsForNobody+"/actions/"+stopAct["id"].(string), map[string]any{"decision": "stop"})
	c.waitStatus(waitsForNobody, "failed")
	rk := c.ok(http.StatusCreated, "POST", "/v1/keys", map[string]any{"name": "tour-runner", "role": "runner"})
	startRunner(t, srv.url, rk["key"].(string), "tour-box", "--label", "tour")
	require.Eventually(t, func() bool {
		l := c.ok(http.StatusOK, "GET", "/v1/runners", nil)
		data, _ := l["data"].([]any)
		return len(data) == 1
	}, 30*time.Second, 50*time.Millisecond, "the runner is listed")
	c.waitStatus(waitsForBox, "idle")
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+waitsForBox+"/actions?status=resolved", nil)
	c.ok(http.StatusOK, "GET", "/v1/sessions/"+waitsForBox+"/events", nil)
	c.ok(http.StatusForbidden, "GET", "/v1/runners/connect", nil)
	c.ok(http.StatusUpgradeRequired, "GET", "/v1/runners/connect", nil, "Authorization", "Bearer "+rk["key"].(string))

	// Errors, in the one error shape.
	c.ok(http.StatusNotFound, "GET", "/v1/sessions/ses_doesnotexist", nil)
	c.ok(http.StatusBadRequest, "POST", "/v1/sessions", map[string]any{"input": "x", "budget": map[string]any{"max_cost_usd": -1}, "agent": "tour"})
	c.ok(http.StatusUnauthorized, "GET", "/v1/sessions", nil, "Authorization", "Bearer lh_wrong")
	c.ok(http.StatusConflict, "POST", "/v1/sessions", map[string]any{"agent": "tour", "input": "other"}, "Idempotency-Key", "tour-create-1")
	c.ok(http.StatusNotFound, "GET", "/v1/sessions/ses_doesnotexist/events/stream", nil)

	proxy.requireValid()

	// Every operation of the document was checked at least once.
	validated, _, _ := proxy.counts()
	var doc2 struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(openapi.JSON(), &doc2))
	var missed []string
	for path, item := range doc2.Paths {
		for method := range item {
			if method == "parameters" {
				continue
			}
			if validated[strings.ToUpper(method)+" "+path] == 0 {
				missed = append(missed, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(missed)
	require.Empty(t, missed, "operations of the document no answer checked (checked: %v)", validated)
}

// streamOnce opens an event stream, reads its first frame and leaves.
func streamOnce(t *testing.T, url string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tourKey)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	buf := make([]byte, 1)
	var got []byte
	for !bytes.Contains(got, []byte("\n\n")) {
		n, err := resp.Body.Read(buf)
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	require.Contains(t, string(got), "id: 1\n")
}
