package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// treeSession is a session of the canned tree below.
func treeSession(id, parent string, status lt.SessionStatus, tokens int64, kids ...lt.Session) lt.Session {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := lt.Session{ID: id, Status: status, Agent: lt.AgentRef{Name: "worker", Version: 2}, Input: "task of " + id,
		Usage: lt.Usage{InputTokens: tokens, OutputTokens: 1, CostUSD: 0.01}, Metadata: json.RawMessage(`{"team":"a"}`),
		CreatedAt: created, UpdatedAt: created, Subagents: kids}
	if parent != "" {
		s.ParentID = &parent
	}
	return s
}

func TestShowSubagentsPrintsTheTree(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ask := lt.Action{ID: "act_ask", SessionID: "ses_g1", Type: lt.ActionInput, Status: lt.ActionPending,
		Question: "Which region?", CreatedAt: created}
	approve := lt.Action{ID: "act_mail", SessionID: "ses_c2", Type: lt.ActionApproval, Status: lt.ActionPending,
		Tool: "send_email", Summary: "Send an email to ceo@acme.com", CreatedAt: created}
	g1 := treeSession("ses_g1", "ses_c1", lt.SessionRequiresAction, 99)
	g1.RequiredActions = []lt.Action{ask}
	c2 := treeSession("ses_c2", "ses_root", lt.SessionRequiresAction, 19)
	c2.RequiredActions = []lt.Action{approve}
	stop := lt.StopBudgetExceeded
	g2 := treeSession("ses_g2", "ses_c1", lt.SessionFailed, 9)
	g2.StopReason = &stop
	root := treeSession("ses_root", "", lt.SessionRunning, 1999,
		treeSession("ses_c1", "ses_root", lt.SessionRunning, 499, g1, g2), c2)

	var (
		mu    sync.Mutex
		asked []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(root)
	}))
	t.Cleanup(srv.Close)

	out := cliOK(t, "show", "ses_root", "--subagents", "--server", srv.URL)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Regexp(t, `^SESSION +STATUS +AGENT +TOKENS +COST +ACTIONS +INPUT$`, lines[0])
	require.Regexp(t, `^ses_root +running +worker v2 +2,000 +\$0\.0100 +0 +task of ses_root$`, lines[1])
	require.Regexp(t, `^├─ ses_c1 +running +worker v2 +500 `, lines[2])
	require.Regexp(t, `^│  ├─ ses_g1 +requires_action +worker v2 +100 +\$0\.0100 +1 `, lines[3])
	require.Regexp(t, `^│  └─ ses_g2 +failed \(budget_exceeded\) +worker v2 +10 `, lines[4])
	require.Regexp(t, `^└─ ses_c2 +requires_action +worker v2 +20 +\$0\.0100 +1 `, lines[5])
	// Columns line up under the tree's indentation.
	col := func(line, word string) int { return utf8.RuneCountInString(line[:strings.Index(line, word)]) }
	require.Equal(t, col(lines[1], "running"), col(lines[3], "requires_action"))
	require.Equal(t, "", lines[6])
	require.Equal(t, "Pending actions:", lines[7])
	require.Regexp(t, `^  act_ask +ses_g1 +input +- .* Which region\?$`, lines[9])
	require.Regexp(t, `^  act_mail +ses_c2 +approval +send_email .* Send an email to ceo@acme\.com$`, lines[10])
	require.Contains(t, out, "longhaul action ACTION_ID")

	want, err := json.Marshal(root)
	require.NoError(t, err)
	require.JSONEq(t, string(want), cliOK(t, "show", "ses_root", "--subagents", "--json", "--server", srv.URL))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"GET /v1/sessions/ses_root?include=subagents", "GET /v1/sessions/ses_root?include=subagents"}, asked)
}

func TestShowSubagentsOnARealServer(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	id, act := startFunctionSession(t, s)
	out := cliOK(t, "show", id, "--subagents", "--server", s.url)
	require.Regexp(t, `(?m)^`+id+` +requires_action +inline v1 `, out, "a session without sub-agents is a tree of one")
	require.Regexp(t, `(?m)^  `+act.ID+` +`+id+` +function_call +lookup `, out)
	tree := cliJSON[lt.Session](t, "show", id, "--subagents", "--json", "--server", s.url)
	require.Equal(t, id, tree.ID)
	require.Empty(t, tree.Subagents)
}

// cannedTreeStream serves a tree stream of the given events, then stays
// open until the client leaves; it records each request's Last-Event-ID and
// query.
type cannedTreeStream struct {
	events []lt.Event

	mu       sync.Mutex
	requests []string
}

func (c *cannedTreeStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.requests = append(c.requests, r.URL.RequestURI()+" Last-Event-ID="+r.Header.Get("Last-Event-ID"))
	c.mu.Unlock()
	start, err := lt.ParseTreeCursor(r.Header.Get("Last-Event-ID"))
	if err != nil {
		http.Error(w, "bad cursor", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	cursor := lt.TreeCursor{}
	for id, seq := range start {
		cursor[id] = seq
	}
	for _, ev := range c.events {
		if ev.Seq <= start[ev.SessionID] {
			continue
		}
		cursor[ev.SessionID] = ev.Seq
		data, _ := json.Marshal(ev)
		fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", cursor, ev.Type, data)
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func (c *cannedTreeStream) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.requests...)
}

func TestEventsFollowSubagents(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// The data as the engine journals it (lt.SubagentSpawnedData and
	// lt.SubagentCompletedData).
	spawned := json.RawMessage(`{"step":1,"index":0,"call_id":"call_1","child_id":"ses_c1",` +
		`"agent":{"name":"researcher","version":1},"input":"find the prices","budget":{}}`)
	completed := json.RawMessage(`{"child_id":"ses_c1","turn_id":"turn_9","status":"completed","output":"3 prices",` +
		`"usage":{"input_tokens":1200,"output_tokens":34,"cost_usd":0.02}}`)
	canned := &cannedTreeStream{events: []lt.Event{
		{Seq: 3, Type: lt.EventTurnStarted, Time: at, SessionID: "ses_root", Data: json.RawMessage(`{"turn_id":"turn_1"}`)},
		{Seq: 4, Type: lt.EventSubagentSpawned, Time: at, SessionID: "ses_root", Data: spawned},
		{Seq: 1, Type: lt.EventSessionCreated, Time: at, SessionID: "ses_c1", Data: json.RawMessage(`{"input":"find the prices"}`)},
		{Seq: 5, Type: lt.EventSubagentCompleted, Time: at, SessionID: "ses_root", Data: completed},
	}}
	srv := httptest.NewServer(canned)
	t.Cleanup(srv.Close)

	follow := func(args ...string) (*outBuffer, context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		out := newOutBuffer()
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, append([]string{"events", "ses_root", "--follow", "--subagents", "--server", srv.URL}, args...), out, newOutBuffer())
		}()
		return out, cancel, done
	}

	out, cancel, done := follow("--after", "2")
	text := out.waitFor(t, "subagent.completed")
	cancel()
	require.NoError(t, <-done, "interrupting --follow is the normal way to stop")
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	require.Len(t, lines, 4)
	require.Regexp(t, `^ses_root +3  .*  turn\.started `, lines[0])
	require.Regexp(t, `^ses_root +4  .*  subagent\.spawned +step 1: ses_c1 \(agent researcher v1\): "find the prices"$`, lines[1])
	require.Regexp(t, `^ses_c1 +1  .*  session\.created `, lines[2])
	require.Regexp(t, `^ses_root +5  .*  subagent\.completed +ses_c1 completed · 1,234 tok · \$0\.0200: "3 prices"$`, lines[3])
	require.Equal(t, []string{"/v1/sessions/ses_root/events/stream?include=subagents Last-Event-ID=" + lt.TreeCursor{"ses_root": 2}.String()},
		canned.seen(), "--after is the session's own seq")

	out, cancel, done = follow("--json", "--after", "2")
	text = out.waitFor(t, `"type":"subagent.completed"`)
	cancel()
	require.NoError(t, <-done)
	var sessions []string
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var ev lt.Event
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		sessions = append(sessions, ev.SessionID)
	}
	require.Equal(t, []string{"ses_root", "ses_root", "ses_c1", "ses_root"}, sessions)
}

func TestEventsFollowSubagentsOnARealServer(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	id, _ := startFunctionSession(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newOutBuffer()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"events", id, "--follow", "--subagents", "--json", "--server", s.url}, out, newOutBuffer())
	}()
	text := out.waitFor(t, `"type":"action.required"`)
	cancel()
	require.NoError(t, <-done)
	events := parseJSONLines(t, text)
	for i, ev := range events {
		require.EqualValues(t, i+1, ev.Seq, "one session: its journal in order")
		require.Equal(t, id, ev.SessionID)
	}
}

func TestEventsSubagentsNeedsFollow(t *testing.T) {
	t.Parallel()
	r := cliRun(t, "events", "ses_1", "--subagents")
	require.Error(t, r.err)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--subagents needs --follow")
}
