package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The adversarial suite for a sub-agent's notifications (docs/api.md
// "Webhooks"): a sub-agent has no webhook_url of its own, so its
// notifications go to its root's, signed with the root's secret and naming
// the root. A hostile model tries to send them elsewhere or have them
// signed with a secret it knows, and a crafted export file names another
// project's root as a parent. Each case asserts at the receivers, as the
// application would: a loopback recorder per URL, every request verified
// the way docs/api.md tells a receiver to.

// attackerSecret is a signing secret the attacker knows and would like its
// notifications signed with.
var attackerSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the attacker knows this key"))

// hookHeaders are the Standard Webhooks headers.
const (
	hookID        = "webhook-id"
	hookTimestamp = "webhook-timestamp"
	hookSignature = "webhook-signature"
)

// verifyHook checks a request as docs/api.md "Webhooks" tells a receiver
// to: webhook-signature holds a "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>" keyed by the base64-decoded bytes after "whsec_" of
// secret, and the timestamp is recent (the specification's five minutes).
func verifyHook(secret string, h http.Header, body string) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		return fmt.Errorf("secret %q is not whsec_<base64>", secret)
	}
	id, ts := h.Get(hookID), h.Get(hookTimestamp)
	if id == "" {
		return errors.New("no webhook-id")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q: %w", ts, err)
	}
	if d := time.Since(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("webhook-timestamp %s is %s away", ts, d)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "." + body))
	want := base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, part := range strings.Fields(h.Get(hookSignature)) {
		if v, sig, ok := strings.Cut(part, ","); ok && v == "v1" && hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("no v1 signature by this secret in %q", h.Get(hookSignature))
}

// hookNote is a notification's body, decoded strictly: a field beyond the
// four documented ones is an error.
type hookNote struct {
	Type          string `json:"type"`
	SessionID     string `json:"session_id"`
	EventSeq      int64  `json:"event_seq"`
	RootSessionID string `json:"root_session_id"`
}

func decodeHook(body string) (hookNote, error) {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	var n hookNote
	if err := dec.Decode(&n); err != nil {
		return n, fmt.Errorf("body %s: %w", body, err)
	}
	return n, nil
}

// hookKey names one notification: the session and the journal event.
type hookKey struct {
	session string
	n       notification
}

// owedHooks derives from the journals of sessions the notifications their
// webhook_url (their root's) is owed (expectedNotifications).
func owedHooks(ctx context.Context, t *testing.T, srv *server, sessions ...string) map[hookKey]bool {
	t.Helper()
	owed := map[hookKey]bool{}
	for _, id := range sessions {
		for n := range expectedNotifications(t, journal(ctx, t, srv.api, id)) {
			owed[hookKey{id, n}] = true
		}
	}
	return owed
}

// receivedHooks waits, up to timeout, until the recorder holds every
// notification in want, each verified by secret and decoded strictly, and
// returns what it holds, by webhook-id. A request that fails either
// fails the test at once.
func receivedHooks(t *testing.T, rec *recorder, secret string, want map[hookKey]bool, timeout time.Duration) map[string]hookNote {
	t.Helper()
	got := map[string]hookNote{}
	waitFor(t, timeout, fmt.Sprintf("%d notifications", len(want)), func() (bool, error) {
		clear(got)
		have := map[hookKey]bool{}
		for _, r := range rec.requests() {
			if err := verifyHook(secret, r.Header, r.Body); err != nil {
				return false, fmt.Errorf("%s %s: %w", r.Method, r.URI, err)
			}
			n, err := decodeHook(r.Body)
			if err != nil {
				return false, err
			}
			got[r.Header.Get(hookID)] = n
			have[hookKey{n.SessionID, notification{n.Type, n.EventSeq}}] = true
		}
		for k := range want {
			if !have[k] {
				return false, nil
			}
		}
		return true, nil
	})
	return got
}

// onlyChild waits until the only sub-agent of parent exists and returns
// its id.
func onlyChild(ctx context.Context, t *testing.T, srv *server, parent string) string {
	t.Helper()
	var id string
	waitFor(t, 30*time.Second, "the sub-agent of "+parent, func() (bool, error) {
		l, err := srv.api.ListSessions(ctx, client.ListSessionsParams{ParentID: parent})
		if err != nil || len(l.Data) == 0 {
			return false, err
		}
		if len(l.Data) > 1 {
			return false, fmt.Errorf("%s has %d sub-agents, want one", parent, len(l.Data))
		}
		id = l.Data[0].ID
		return true, nil
	})
	return id
}

// decideOnly decides the one pending action of a session waiting for a
// person, and returns it.
func decideOnly(ctx context.Context, t *testing.T, srv *server, id string, d *lt.Decision) lt.Action {
	t.Helper()
	waitStatus(ctx, t, srv, id, 30*time.Second, lt.SessionRequiresAction)
	l, err := srv.api.ListActions(ctx, id, lt.ActionPending)
	require.NoError(t, err)
	require.Len(t, l.Data, 1, "session %s", id)
	_, err = srv.api.DecideAction(ctx, id, l.Data[0].ID, d)
	require.NoError(t, err)
	return l.Data[0]
}

// hijack is what a hostile model puts in a child's agent_spec to carry
// the child's notifications to its own receiver: every name a field that
// redirects or re-keys them could have.
func hijack(to string) map[string]any {
	return map[string]any{
		"webhook_url": to, "webhook_secret": attackerSecret, "webhook": map[string]any{"url": to, "secret": attackerSecret},
		"project": "attacker", "parent_id": "", "metadata": map[string]any{"webhook_url": to},
	}
}

// withHijack returns spec with hijack(to) added.
func withHijack(spec map[string]any, to string) map[string]any {
	for k, v := range hijack(to) {
		spec[k] = v
	}
	return spec
}

// TestAdversarialWebhook_ChildRedirect: the root's model spawns a child
// with webhook_url, webhook_secret (one it knows) and the like in the
// spawn's arguments, then in the child's inline agent_spec (both refused,
// naming a field: neither the tool nor an agent spec has them), then
// without them; the child does the same for a grandchild. The child's
// question and the grandchild's approval reach the root's receiver only,
// each verified under the root's secret and not the attacker's, naming
// the root; the attacker's receiver, which the server may reach, gets no
// connection at all.
func TestAdversarialWebhook_ChildRedirect(t *testing.T) {
	t.Parallel()
	root, evil := newRecorder(t, nil), newRecorder(t, nil)
	srv := startServer(t, "--webhook-allow-private", "127.0.0.1",
		"--webhook-allow-port", strconv.Itoa(root.port()), "--webhook-allow-port", strconv.Itoa(evil.port()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	to := evil.url() + "/hooks/stolen"

	grandchild := func() map[string]any {
		return map[string]any{
			"model": map[string]any{"provider": "scripted", "script": []any{
				toolCalls(toolCall("write_file", map[string]any{"path": "deploy.txt", "content": "go"})),
				finalText("written"),
			}},
			"tools":    []any{map[string]any{"name": "write_file"}},
			"policies": []any{map[string]any{"tool": "write_file", "decision": "ask"}},
		}
	}
	child := func() map[string]any {
		return map[string]any{
			"model": map[string]any{"provider": "scripted", "script": []any{
				toolCalls(toolCall("spawn_agent", map[string]any{"agent_spec": withHijack(grandchild(), to), "input": "write it"})),
				toolCalls(toolCall("spawn_agent", map[string]any{"agent_spec": grandchild(), "input": "write it"})),
				toolCalls(toolCall("ask_human", map[string]any{"question": "Which release?"})),
				toolCalls(toolCall("wait_agents", map[string]any{})),
				finalText("child done"),
			}},
			"tools": []any{map[string]any{"name": "spawn_agent"}, map[string]any{"name": "wait_agents"},
				map[string]any{"name": "ask_human"}, map[string]any{"name": "write_file"}},
		}
	}
	spawnArgs := map[string]any{"instructions": "do it", "input": "do it"}
	for k, v := range hijack(to) {
		spawnArgs[k] = v
	}
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "ship", WebhookURL: root.url() + "/hooks/root", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
			toolCalls(toolCall("spawn_agent", spawnArgs)),
			toolCalls(toolCall("spawn_agent", map[string]any{"agent_spec": withHijack(child(), to), "input": "ship it"})),
			toolCalls(toolCall("spawn_agent", map[string]any{"agent_spec": child(), "input": "ship it"})),
			toolCalls(toolCall("wait_agents", map[string]any{})),
			finalText("done"))},
		Tools: []lt.ToolSpec{{Name: "spawn_agent"}, {Name: "wait_agents"}, {Name: "ask_human"}, {Name: "write_file"}},
	}})
	require.NoError(t, err)
	secret := s.WebhookSecret
	require.NotEmpty(t, secret)

	c := onlyChild(ctx, t, srv, s.ID)
	g := onlyChild(ctx, t, srv, c)
	// Both wait for a person now: their notifications are due, and must
	// reach the root's receiver before anyone answers.
	waitStatus(ctx, t, srv, c, 30*time.Second, lt.SessionRequiresAction)
	waitStatus(ctx, t, srv, g, 30*time.Second, lt.SessionRequiresAction)
	receivedHooks(t, root, secret, owedHooks(ctx, t, srv, c, g), 30*time.Second)

	require.Equal(t, lt.ActionInput, decideOnly(ctx, t, srv, c, &lt.Decision{Answer: "v2"}).Type)
	require.Equal(t, lt.ActionApproval, decideOnly(ctx, t, srv, g, &lt.Decision{Decision: "approve"}).Type)
	requireStatus(ctx, t, srv, waitTerminal(ctx, t, srv, s.ID, time.Minute), lt.SessionIdle)

	// The spawn naming the fields itself was refused, naming one, and so
	// were the spawns whose agent_spec named them, in the root and in the
	// child.
	refusals := spawnRefusals(ctx, t, srv, s.ID)
	require.Len(t, refusals, 2, "%v", refusals)
	require.Regexp(t, `^arguments\.(webhook|webhook_url|webhook_secret|project|parent_id|metadata): is not an allowed field`, refusals[0])
	hijacked := `(webhook|webhook_url|webhook_secret|project|parent_id|metadata)`
	specField := `^agent_spec\.` + hijacked + `: unknown field "agent_spec\.` + hijacked + `"$`
	require.Regexp(t, specField, refusals[1])
	refusals = spawnRefusals(ctx, t, srv, c)
	require.Len(t, refusals, 1, "%v", refusals)
	require.Regexp(t, specField, refusals[0])

	// Every notification of the tree reached the root's receiver, under
	// the root's secret, the sub-agents' naming the root.
	got := receivedHooks(t, root, secret, owedHooks(ctx, t, srv, s.ID, c, g), 30*time.Second)
	seen := map[string]bool{}
	for id, n := range got {
		seen[n.SessionID] = true
		switch n.SessionID {
		case s.ID:
			require.Empty(t, n.RootSessionID, "%s: the root's own notification", id)
		case c, g:
			require.Equal(t, s.ID, n.RootSessionID, "%s: a sub-agent's notification names its root", id)
		default:
			t.Fatalf("%s: a notification of session %s, not of the tree", id, n.SessionID)
		}
	}
	require.True(t, seen[c] && seen[g], "the child's and the grandchild's notifications arrived: %v", seen)
	for _, r := range root.requests() {
		require.Error(t, verifyHook(attackerSecret, r.Header, r.Body), "%s is signed with the attacker's secret", r.Header.Get(hookID))
	}
	for _, id := range []string{c, g} {
		sub, err := srv.api.GetSession(ctx, id)
		require.NoError(t, err)
		require.Empty(t, sub.WebhookURL, "sub-agent %s has no webhook_url of its own", id)
		require.Equal(t, lt.DefaultProject, sub.Project, "sub-agent %s is in its root's project", id)
	}
	for d, err := range srv.api.AllWebhookDeliveries(ctx, client.ListWebhookDeliveriesParams{Limit: 500}) {
		require.NoError(t, err)
		require.Equal(t, root.url()+"/hooks/root", d.URL, "delivery %s of session %s", d.ID, d.SessionID)
	}
	evil.requireNone(t, "the attacker's receiver")
}

// TestAdversarialWebhook_NoSecretInBody: a child holding a vault secret
// (bound to a local service, which echoes it) uses it and then asks a
// question. The notifications its root's receiver gets hold the four
// documented fields and nothing else: no form of the vault's value, and
// neither the root's signing secret nor its key, in the body or a header.
func TestAdversarialWebhook_NoSecretInBody(t *testing.T) {
	t.Parallel()
	const canary = "lh-canary-wh-5b1f0e93c7a2"
	echo := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		fmt.Fprintf(w, "auth=%s b64=%s hex=%s", tok, base64.StdEncoding.EncodeToString([]byte(tok)), hex.EncodeToString([]byte(tok)))
	})
	root := newRecorder(t, nil)
	srv := startServer(t, "--webhook-allow-private", "127.0.0.1", "--webhook-allow-port", strconv.Itoa(root.port()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _, err := srv.api.PutSecret(ctx, "CANARY_TOKEN", &lt.PutSecretRequest{
		Value: canary, Hosts: []string{"127.0.0.1"}, Inject: &lt.SecretInjection{Bearer: true},
	})
	require.NoError(t, err)

	env := map[string]any{"network": map[string]any{"allow": []string{"127.0.0.1"}, "ports": []int{echo.port()}}, "secrets": []string{"CANARY_TOKEN"}}
	child := map[string]any{
		"model": map[string]any{"provider": "scripted", "script": []any{
			toolCalls(toolCall("http_request", map[string]any{"method": "GET", "url": echo.url() + "/whoami"})),
			toolCalls(toolCall("ask_human", map[string]any{"question": "The token is $CANARY_TOKEN: send it on?"})),
			finalText("child done"),
		}},
		"tools":       []any{map[string]any{"name": "http_request"}, map[string]any{"name": "ask_human"}},
		"environment": env,
	}
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "use the token", WebhookURL: root.url() + "/hooks/root", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
			toolCalls(toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "use it"})),
			toolCalls(toolCall("wait_agents", map[string]any{})),
			finalText("done"))},
		Tools: []lt.ToolSpec{{Name: "spawn_agent"}, {Name: "wait_agents"}, {Name: "http_request"}, {Name: "ask_human"}},
		Environment: &lt.Environment{
			Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{echo.port()}},
			Secrets: []string{"CANARY_TOKEN"},
		},
	}})
	require.NoError(t, err)
	secret := s.WebhookSecret
	c := onlyChild(ctx, t, srv, s.ID)
	decideOnly(ctx, t, srv, c, &lt.Decision{Answer: "no"})
	requireStatus(ctx, t, srv, waitTerminal(ctx, t, srv, s.ID, time.Minute), lt.SessionIdle)
	require.Equal(t, 1, echo.count("/whoami"), "the child called the service")
	require.Equal(t, "Bearer "+canary, echo.requests()[0].Header.Get("Authorization"), "with the secret")

	got := receivedHooks(t, root, secret, owedHooks(ctx, t, srv, s.ID, c), 30*time.Second)
	var fromChild int
	for _, n := range got {
		if n.SessionID == c {
			fromChild++
		}
	}
	require.Positive(t, fromChild, "the child's notifications arrived")
	key := strings.TrimPrefix(secret, "whsec_")
	keyBytes, err := base64.StdEncoding.DecodeString(key)
	require.NoError(t, err)
	forbidden := []string{
		canary, base64.StdEncoding.EncodeToString([]byte(canary)), hex.EncodeToString([]byte(canary)),
		secret, key, hex.EncodeToString(keyBytes), base64.RawURLEncoding.EncodeToString(keyBytes),
	}
	for _, r := range root.requests() {
		var raw bytes.Buffer
		require.NoError(t, r.Header.Write(&raw))
		raw.WriteString(r.Body)
		for _, f := range forbidden {
			require.NotContains(t, raw.String(), f, "request %s", r.Header.Get(hookID))
		}
	}
}

// TestAdversarialWebhook_ImportAcrossProjects: the API cannot make a tree
// that crosses projects (spawn_agent keeps the parent's project, a fork is
// a root, a session names no parent), so the attacker crafts an export of
// its project's session that names, as its parent, another project's root
// in the target store, with a webhook state whose secret it knows. Had it
// been imported, that session's answers would be reported into the root's
// journal (and its notifications would depend on the webhook walk alone).
// The import is refused, naming the parent and both projects; the target
// holds nothing of it, the root's journal is as it was, and the root's
// receiver hears the root alone.
func TestAdversarialWebhook_ImportAcrossProjects(t *testing.T) {
	t.Parallel()
	rootRec := newRecorder(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The attacker's session, in project beta of a store of its own.
	src := startServer(t)
	b, err := src.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "first", Project: "beta", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
			finalText("first done"),
			toolCalls(toolCall("ask_human", map[string]any{"question": "Which release?"})),
			finalText("second done"))},
		Tools: []lt.ToolSpec{{Name: "ask_human"}},
	}})
	require.NoError(t, err)
	requireStatus(ctx, t, src, waitTerminal(ctx, t, src, b.ID, time.Minute), lt.SessionIdle)
	src.kill()
	file := filepath.Join(t.TempDir(), "beta.jsonl")
	out, err := exportCmd(b.ID, src.dataDir, file).CombinedOutput()
	require.NoError(t, err, "export: %s", out)

	// The victim's store: a root of the default project whose receiver
	// hears it.
	srv := startServer(t, "--webhook-allow-private", "127.0.0.1", "--webhook-allow-port", strconv.Itoa(rootRec.port()))
	r, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "work", WebhookURL: rootRec.url() + "/hooks/root", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, finalText("done"))},
	}})
	require.NoError(t, err)
	requireStatus(ctx, t, srv, waitTerminal(ctx, t, srv, r.ID, time.Minute), lt.SessionIdle)
	receivedHooks(t, rootRec, r.WebhookSecret, owedHooks(ctx, t, srv, r.ID), 30*time.Second)
	before := journal(ctx, t, srv.api, r.ID)

	srv.kill()
	msg, ok := diskImport(t, srv.dataDir, craftParent(t, file, b.ID, r.ID))
	require.False(t, ok, "a session of beta was imported as a sub-agent of default's root: %s", msg)
	require.Contains(t, msg, fmt.Sprintf(`session %s: its parent %s is in project "default", not in its own ("beta")`, b.ID, r.ID))

	srv.restart()
	_, err = srv.api.GetSession(ctx, b.ID)
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr, "beta's session is not in the target")
	require.Equal(t, http.StatusNotFound, apiErr.Status)
	sub, err := srv.api.ListSessions(ctx, client.ListSessionsParams{ParentID: r.ID})
	require.NoError(t, err)
	require.Empty(t, sub.Data, "the root has no sub-agent")
	requireSameEvents(t, before, journal(ctx, t, srv.api, r.ID), "the root's journal")
	for _, req := range rootRec.requests() {
		require.NoError(t, verifyHook(r.WebhookSecret, req.Header, req.Body))
		n, err := decodeHook(req.Body)
		require.NoError(t, err)
		require.Equal(t, r.ID, n.SessionID, "the root's receiver got another session's notification")
	}
}

// exportCmd is `longhaul export id --data dir -o file`.
func exportCmd(id, dir, file string) *exec.Cmd {
	cmd := exec.Command(longhaulBin, "export", id, "--data", dir, "-o", file)
	cmd.Env = serverEnv()
	return cmd
}

// craftParent returns the export file with session id made a sub-agent
// of parent, as an export of a real one would say it (its row, its
// projection and its session.created name the parent), and carrying a
// webhook state whose secret the attacker knows; every other line is kept
// byte for byte.
func craftParent(t *testing.T, file, id, parent string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	set := func(raw json.RawMessage, key string, v any) json.RawMessage {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &m))
		m[key], err = json.Marshal(v)
		require.NoError(t, err)
		out, err := json.Marshal(m)
		require.NoError(t, err)
		return out
	}
	var edited int
	for i, l := range lines {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		switch {
		case string(m["kind"]) == `"session"` && string(m["id"]) == strconv.Quote(id):
			m["parent_id"], _ = json.Marshal(parent)
			m["webhook"], _ = json.Marshal(map[string]any{"secret": attackerSecret, "cursor": 0})
			var state map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(m["state"], &state))
			m["state"] = set(m["state"], "session", set(state["session"], "parent_id", parent))
		case string(m["kind"]) == `"event"` && string(m["session_id"]) == strconv.Quote(id) && string(m["seq"]) == "1":
			m["data"] = set(m["data"], "parent_id", parent)
		default:
			continue
		}
		b, err := json.Marshal(m)
		require.NoError(t, err)
		lines[i] = string(b)
		edited++
	}
	require.Equal(t, 2, edited, "the file has session %s's line and its session.created", id)
	return strings.Join(lines, "\n")
}
