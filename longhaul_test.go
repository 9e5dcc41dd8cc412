package longhaul_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul"
	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// api is the part of the API that the runtime and the client both serve,
// with the same signatures: code written against it runs in-process or
// over HTTP alike.
type api interface {
	CreateSession(ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error)
	GetSession(ctx context.Context, id string) (*lt.Session, error)
	ListSessions(ctx context.Context, p client.ListSessionsParams) (*lt.List[lt.Session], error)
	CreateTurn(ctx context.Context, sessionID string, req *lt.CreateTurnRequest) (*lt.Turn, error)
	ListTurns(ctx context.Context, sessionID string) (*lt.List[lt.Turn], error)
	GetTurn(ctx context.Context, sessionID, turnID string) (*lt.Turn, error)
	Cancel(ctx context.Context, sessionID string, req *lt.CancelRequest) (*lt.Session, error)
	Steer(ctx context.Context, sessionID string, req *lt.SteerRequest) (*lt.Session, error)
	SendSignal(ctx context.Context, sessionID string, req *lt.SignalRequest) (*lt.Signal, error)
	Fork(ctx context.Context, sessionID string, req *lt.ForkRequest) (*lt.Session, error)
	Review(ctx context.Context, sessionID string, req *lt.ReviewRequest) (*lt.Session, error)
	AddConstraint(ctx context.Context, sessionID, constraint string) (*lt.Session, error)
	UpdateBudget(ctx context.Context, sessionID string, p *lt.BudgetPatch) (*lt.Session, error)
	ListEvents(ctx context.Context, sessionID string, after int64, limit int) (*lt.List[lt.Event], error)
	ListActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error)
	ListAllActions(ctx context.Context, p lt.ListActionsParams) (*lt.List[lt.Action], error)
	AllActions(ctx context.Context, p lt.ListActionsParams) iter.Seq2[lt.Action, error]
	GetAction(ctx context.Context, actionID string) (*lt.Action, error)
	DecideAction(ctx context.Context, sessionID, actionID string, d *lt.Decision) (*lt.Action, error)
	ListEffects(ctx context.Context, sessionID string) (*lt.List[lt.Effect], error)
	ListCheckpoints(ctx context.Context, sessionID string) (*lt.List[lt.Checkpoint], error)
	ListArtifacts(ctx context.Context, sessionID string) (*lt.List[lt.Artifact], error)
	GetArtifact(ctx context.Context, id string) (*lt.Artifact, error)
	ArtifactContent(ctx context.Context, id string) ([]byte, string, error)
	GetBlob(ctx context.Context, sha256Hex string) ([]byte, error)
	SessionTrace(ctx context.Context, id string, includeSubagents bool) (*lt.Trace, error)
	PutAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, error)
	ListAgents(ctx context.Context, project string) (*lt.List[lt.Agent], error)
	GetAgent(ctx context.Context, project, name string, version int) (*lt.Agent, error)
	PutSecret(ctx context.Context, name string, req *lt.PutSecretRequest) (*lt.Secret, bool, error)
	ListSecrets(ctx context.Context, project string) (*lt.List[lt.Secret], error)
	DeleteSecret(ctx context.Context, project, name string) error
	CreateWebhookEndpoint(ctx context.Context, req *lt.CreateWebhookEndpointRequest) (*lt.WebhookEndpoint, error)
	ListWebhookEndpoints(ctx context.Context, project string) (*lt.List[lt.WebhookEndpoint], error)
	DeleteWebhookEndpoint(ctx context.Context, id string) error
	ListWebhookDeliveries(ctx context.Context, p client.ListWebhookDeliveriesParams) (*lt.List[lt.WebhookDelivery], error)
	TaskReport(ctx context.Context, p lt.TaskReportParams) (*lt.TaskReport, error)
	ListAudit(ctx context.Context, p lt.ListAuditParams) (*lt.List[lt.AuditEntry], error)
	Pause(ctx context.Context, sessionID string, req *lt.PauseRequest) (*lt.Session, error)
	Resume(ctx context.Context, sessionID string) (*lt.Session, error)
	Me(ctx context.Context) (*lt.Identity, error)
}

var (
	_ api = (*client.Client)(nil)
	_ api = (*longhaul.Runtime)(nil)
)

var quiet = slog.New(slog.DiscardHandler)

// open starts a runtime on dir, closed when the test ends.
func open(t *testing.T, opts longhaul.Options) *longhaul.Runtime {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	rt, err := longhaul.Open(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, rt.Close(context.Background())) })
	return rt
}

func scripted(script string, tools ...lt.ToolSpec) lt.AgentSpec {
	return lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(script)}, Tools: tools}
}

// waitStatus polls the session until it has one of the statuses.
func waitStatus(t *testing.T, rt *longhaul.Runtime, id string, want ...lt.SessionStatus) *lt.Session {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s, err := rt.GetSession(context.Background(), id)
		require.NoError(t, err)
		for _, w := range want {
			if s.Status == w {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: status %s, want %v", id, s.Status, want)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

func toolResults(t *testing.T, rt *longhaul.Runtime, id string) (completed, failed []map[string]any) {
	t.Helper()
	evs, err := rt.ListEvents(context.Background(), id, 0, 500)
	require.NoError(t, err)
	for _, ev := range evs.Data {
		var d map[string]any
		switch ev.Type {
		case lt.EventToolCompleted:
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			completed = append(completed, d)
		case lt.EventToolFailed:
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			failed = append(failed, d)
		}
	}
	return completed, failed
}

type lookupIn struct {
	Name string `json:"name"`
}

type lookupOut struct {
	Plan string `json:"plan"`
}

// TestFunctionCallsPendingAtStartAreHandedOver: a function_call action
// created while no handler runs is answered by the handler of the next
// Open; each call is handed over once, with its action's key.
func TestFunctionCallsPendingAtStartAreHandedOver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var mu sync.Mutex
	var calls []longhaul.FunctionCall
	lookup := longhaul.Function("lookup", "Look a customer up.", lt.EffectRead,
		func(ctx context.Context, call longhaul.FunctionCall, in lookupIn) (lookupOut, error) {
			mu.Lock()
			calls = append(calls, call)
			mu.Unlock()
			return lookupOut{Plan: "gold:" + in.Name}, nil
		})
	agent := lt.PutAgentRequest{Name: "crm", Spec: scripted(`[
		{"tool_calls":[{"name":"lookup","arguments":{"name":"acme"}}]},
		{"text":"done"}]`, lookup.Spec())}

	// No handler: the call waits as a required action, across the Close.
	rt, err := longhaul.Open(t.Context(), longhaul.Options{DataDir: dir, Logger: quiet, Agents: []lt.PutAgentRequest{agent}})
	require.NoError(t, err)
	s, err := rt.CreateSession(t.Context(), &lt.CreateSessionRequest{Agent: "crm", Input: "look acme up"})
	require.NoError(t, err)
	s = waitStatus(t, rt, s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	pending := s.RequiredActions[0]
	require.Equal(t, lt.ActionFunctionCall, pending.Type)
	require.NoError(t, rt.Close(t.Context()))

	rt = open(t, longhaul.Options{DataDir: dir, Agents: []lt.PutAgentRequest{agent}, Functions: []*longhaul.GoFunction{lookup}})
	waitStatus(t, rt, s.ID, lt.SessionIdle)
	mu.Lock()
	require.Len(t, calls, 1)
	call := calls[0]
	mu.Unlock()
	require.Equal(t, longhaul.FunctionCall{SessionID: s.ID, TurnID: pending.TurnID, ActionID: pending.ID, CallID: pending.CallID,
		Tool: "lookup", IdempotencyKey: pending.IdempotencyKey}, call)
	require.NotEmpty(t, call.IdempotencyKey)

	a, err := rt.GetAction(t.Context(), pending.ID)
	require.NoError(t, err)
	require.Equal(t, lt.ActionResolved, a.Status)
	require.JSONEq(t, `{"output":{"plan":"gold:acme"}}`, string(a.Resolution))
	completed, _ := toolResults(t, rt, s.ID)
	require.Len(t, completed, 1)
	require.Equal(t, map[string]any{"plan": "gold:acme"}, completed[0]["output"])
}

// TestFunctionErrorsAndPanicsGoBackToTheModel: a handler's error, or its
// panic, decides the call with an error the model sees; the runtime goes
// on.
func TestFunctionErrorsAndPanicsGoBackToTheModel(t *testing.T) {
	t.Parallel()
	failing := longhaul.Function("failing", "Fails.", lt.EffectRead,
		func(ctx context.Context, call longhaul.FunctionCall, in struct{}) (struct{}, error) {
			return struct{}{}, errors.New("the CRM is read-only today")
		})
	panicking := longhaul.Function("panicking", "Panics.", lt.EffectRead,
		func(ctx context.Context, call longhaul.FunctionCall, in struct{}) (struct{}, error) {
			panic("bug")
		})
	rt := open(t, longhaul.Options{DataDir: t.TempDir(), Functions: []*longhaul.GoFunction{failing, panicking}})
	s, err := rt.CreateSession(t.Context(), &lt.CreateSessionRequest{
		AgentSpec: new(scripted(`[
			{"tool_calls":[{"name":"failing","arguments":{}},{"name":"panicking","arguments":{}}]},
			{"text":"gave up"}]`, failing.Spec(), panicking.Spec())),
		Input: "go",
	})
	require.NoError(t, err)
	waitStatus(t, rt, s.ID, lt.SessionIdle)
	completed, failed := toolResults(t, rt, s.ID)
	require.Empty(t, completed)
	require.Len(t, failed, 2)
	errs := map[string]any{failed[0]["tool"].(string): failed[0]["error"], failed[1]["tool"].(string): failed[1]["error"]}
	require.Equal(t, "the CRM is read-only today", errs["failing"])
	require.Equal(t, "function panicking panicked: bug", errs["panicking"])
}

type fetchIn struct {
	URL string `json:"url"`
}

// TestGoToolsRunWithTheirCall: a Go tool gets its decoded input and the
// call's key, session and workspace; a transient error of an idempotent
// tool is retried with the same key; a panic fails the call.
func TestGoToolsRunWithTheirCall(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []longhaul.ToolCall
	var attempts atomic.Int32
	fetch := longhaul.Tool("fetch", "Fetch a URL.", lt.EffectIdempotent,
		func(ctx context.Context, call longhaul.ToolCall, in fetchIn) (map[string]string, error) {
			mu.Lock()
			seen = append(seen, call)
			mu.Unlock()
			if attempts.Add(1) == 1 {
				return nil, longhaul.Transient(errors.New("503 from upstream"), 0)
			}
			return map[string]string{"body": "page of " + in.URL}, nil
		})
	broken := longhaul.Tool("broken", "Panics.", lt.EffectRead,
		func(ctx context.Context, call longhaul.ToolCall, in struct{}) (struct{}, error) { panic("nil map") })
	spec := scripted(`[
		{"tool_calls":[{"name":"fetch","arguments":{"url":"https://example.com"}},{"name":"broken","arguments":{}}]},
		{"text":"ok"}]`, fetch.Spec(), broken.Spec())
	spec.Retry = &lt.RetryPolicy{MaxAttempts: 3, InitialBackoffMS: 1, MaxBackoffMS: 1}
	rt := open(t, longhaul.Options{DataDir: t.TempDir(), Tools: []*longhaul.GoTool{fetch, broken}})
	s, err := rt.CreateSession(t.Context(), &lt.CreateSessionRequest{AgentSpec: &spec, Input: "go"})
	require.NoError(t, err)
	waitStatus(t, rt, s.ID, lt.SessionIdle)

	mu.Lock()
	require.Len(t, seen, 2, "one retry")
	require.Equal(t, seen[0], seen[1], "the retry carries the same call")
	call := seen[0]
	mu.Unlock()
	require.Equal(t, s.ID, call.SessionID)
	require.NotEmpty(t, call.IdempotencyKey)
	require.DirExists(t, call.Workspace)
	require.Equal(t, lt.EffectIdempotent, call.Effect)

	completed, failed := toolResults(t, rt, s.ID)
	require.Len(t, completed, 1)
	require.Equal(t, map[string]any{"body": "page of https://example.com"}, completed[0]["output"])
	var retried, panicked bool
	for _, f := range failed {
		switch f["tool"] {
		case "fetch":
			retried = f["retry"] == true && f["error"] == "503 from upstream"
		case "broken":
			panicked = f["error"] == "tool broken panicked: nil map"
		}
	}
	require.True(t, retried, "the transient failure is journaled as retried: %v", failed)
	require.True(t, panicked, "the panic fails the call: %v", failed)
}

func TestToolAndFunctionRegistrationPanics(t *testing.T) {
	t.Parallel()
	fn := func(ctx context.Context, call longhaul.ToolCall, in fetchIn) (string, error) { return "", nil }
	for name, make := range map[string]func(){
		"bad name":      func() { longhaul.Tool("9lives", "", lt.EffectRead, fn) },
		"engine's tool": func() { longhaul.Tool("finish", "", lt.EffectRead, fn) },
		"bad effect":    func() { longhaul.Tool("t", "", "sometimes", fn) },
		"nil fn":        func() { longhaul.Tool[fetchIn, string]("t", "", lt.EffectRead, nil) },
		"not an object": func() {
			longhaul.Tool("t", "", lt.EffectRead, func(context.Context, longhaul.ToolCall, string) (string, error) { return "", nil })
		},
		"no schema": func() {
			longhaul.Tool("t", "", lt.EffectRead, func(context.Context, longhaul.ToolCall, struct{ C chan int }) (string, error) { return "", nil })
		},
		"function name": func() {
			longhaul.Function("ask_human", "", lt.EffectRead, func(context.Context, longhaul.FunctionCall, fetchIn) (string, error) { return "", nil })
		},
		"function input": func() {
			longhaul.Function("f", "", lt.EffectRead, func(context.Context, longhaul.FunctionCall, []int) (string, error) { return "", nil })
		},
	} {
		require.Panics(t, make, name)
	}
}

func TestOpenRefusesBadOptions(t *testing.T) {
	t.Parallel()
	tool := func(name string) *longhaul.GoTool {
		return longhaul.Tool(name, "", lt.EffectRead, func(context.Context, longhaul.ToolCall, fetchIn) (string, error) { return "", nil })
	}
	function := longhaul.Function("dup", "", lt.EffectRead, func(context.Context, longhaul.FunctionCall, fetchIn) (string, error) { return "", nil })
	for name, tc := range map[string]struct {
		opts longhaul.Options
		want string
	}{
		"no data dir":    {longhaul.Options{}, "Options.DataDir is required"},
		"not postgres":   {longhaul.Options{DataDir: t.TempDir(), PostgresURL: "mysql://x"}, "Options.PostgresURL must start with postgres://"},
		"built-in name":  {longhaul.Options{DataDir: t.TempDir(), Tools: []*longhaul.GoTool{tool("shell")}}, `Options.Tools[0]: "shell" is the name of a built-in tool`},
		"nil tool":       {longhaul.Options{DataDir: t.TempDir(), Tools: []*longhaul.GoTool{nil}}, "Options.Tools[0] is nil"},
		"duplicate name": {longhaul.Options{DataDir: t.TempDir(), Tools: []*longhaul.GoTool{tool("dup")}, Functions: []*longhaul.GoFunction{function}}, `Options.Functions[0]: "dup" is also Options.Tools[0]`},
		"bad sandbox":    {longhaul.Options{DataDir: t.TempDir(), Sandbox: "docker"}, `Sandbox "docker"`},
		"invalid agent":  {longhaul.Options{DataDir: t.TempDir(), Logger: quiet, Agents: []lt.PutAgentRequest{{Name: "a", Spec: lt.AgentSpec{}}}}, "Options.Agents[0]: put agent a: invalid_request (400): required (field spec.model.provider)"},
		"listen addr":    {longhaul.Options{DataDir: t.TempDir(), ListenAddrs: []string{"nope"}}, "Options.ListenAddrs"},
		"model key env":  {longhaul.Options{DataDir: t.TempDir(), ModelKeyEnv: map[string][]string{"LONGHAUL_API_KEYS": {"evil.example.com"}}}, "LONGHAUL_API_KEYS is the server's own configuration"},
	} {
		if tc.opts.Logger == nil {
			tc.opts.Logger = quiet
		}
		_, err := longhaul.Open(t.Context(), tc.opts)
		require.ErrorContains(t, err, tc.want, name)
	}
}

// TestOpenLocksTheDataDirectory: one runtime at a time per data directory,
// and the lock goes with Close.
func TestOpenLocksTheDataDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rt, err := longhaul.Open(t.Context(), longhaul.Options{DataDir: dir, Logger: quiet})
	require.NoError(t, err)
	_, err = longhaul.Open(t.Context(), longhaul.Options{DataDir: dir, Logger: quiet})
	require.ErrorContains(t, err, "is in use by another longhaul process")
	id := rt.NodeID()
	require.NoError(t, rt.Close(t.Context()))
	require.NoError(t, rt.Close(t.Context()), "Close again returns the first result")
	again := open(t, longhaul.Options{DataDir: dir})
	require.Equal(t, id, again.NodeID(), "the node id is kept in the data directory")
}

// TestEnsureAgentWritesVersionsOnlyForChanges: a program that starts
// again with the same agents does not pile up versions.
func TestEnsureAgentWritesVersionsOnlyForChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	v1 := lt.PutAgentRequest{Name: "writer", Spec: scripted(`[{"text":"a"}]`)}
	rt, err := longhaul.Open(t.Context(), longhaul.Options{DataDir: dir, Logger: quiet, Agents: []lt.PutAgentRequest{v1}})
	require.NoError(t, err)
	require.NoError(t, rt.Close(t.Context()))
	rt = open(t, longhaul.Options{DataDir: dir, Agents: []lt.PutAgentRequest{v1}})
	a, err := rt.GetAgent(t.Context(), "", "writer", 0)
	require.NoError(t, err)
	require.Equal(t, 1, a.Version)

	a, wrote, err := rt.EnsureAgent(t.Context(), &lt.PutAgentRequest{Name: "writer", Spec: scripted(`[{"text":"b"}]`)})
	require.NoError(t, err)
	require.True(t, wrote)
	require.Equal(t, 2, a.Version)
	a, wrote, err = rt.EnsureAgent(t.Context(), &lt.PutAgentRequest{Name: "writer", Spec: scripted(`[ {"text": "b"} ]`)})
	require.NoError(t, err)
	require.False(t, wrote, "the same spec, spelled differently")
	require.Equal(t, 2, a.Version)
}

// TestErrorsAreAPIErrors: a caller's mistake is a *client.APIError with
// the API's code and field, as over HTTP.
func TestErrorsAreAPIErrors(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	_, err := rt.GetSession(t.Context(), "ses_nope")
	require.True(t, client.IsNotFound(err))
	require.ErrorContains(t, err, "get session ses_nope: not_found (404)")

	_, err = rt.CreateSession(t.Context(), &lt.CreateSessionRequest{Input: "x", AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "nope"}}})
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, lt.CodeInvalidRequest, ae.Code)
	require.Equal(t, "agent_spec.model.provider", ae.Field)

	_, err = rt.CreateSession(t.Context(), nil)
	require.EqualError(t, err, "create session: req is nil")
	_, err = rt.DecideAction(t.Context(), "", "", &lt.Decision{})
	require.EqualError(t, err, "decide action: sessionID is empty\nactionID is empty")
	_, err = rt.ListEvents(t.Context(), "ses_x", -1, 0)
	require.EqualError(t, err, "list events of ses_x: after -1 is negative")
}

// TestSubscribeEnds: the stream's last value is the error that ended it.
func TestSubscribeEnds(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	var errs []error
	for _, err := range rt.Subscribe(t.Context(), "ses_nope", 0) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.True(t, client.IsNotFound(errs[0]))
	require.ErrorContains(t, errs[0], "subscribe to ses_nope: ")
	for _, err := range rt.StreamEvents(t.Context(), "ses_nope", 0) {
		require.ErrorContains(t, err, "stream events of ses_nope: ")
	}

	s, err := rt.CreateSession(t.Context(), &lt.CreateSessionRequest{AgentSpec: new(scripted(`[{"text":"hi"}]`)), Input: "hi"})
	require.NoError(t, err)
	waitStatus(t, rt, s.ID, lt.SessionIdle)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var seqs []int64
	errs = nil
	for ev, err := range rt.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		seqs = append(seqs, ev.Seq)
		if ev.Type == lt.EventTurnCompleted {
			cancel() // the session is idle: nothing more comes, then ctx ends
		}
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], context.Canceled)
	evs, err := rt.ListEvents(t.Context(), s.ID, 0, 0)
	require.NoError(t, err)
	want := make([]int64, len(evs.Data))
	for i, ev := range evs.Data {
		want[i] = ev.Seq
	}
	require.Equal(t, want, seqs, "every event, once, in order")
	require.Equal(t, int64(1), seqs[0])
}

// TestSubscribeEndsOnClose: a Runtime closed under a stream ends it with
// an error as the last value, not silently: the stream never ends on its
// own.
func TestSubscribeEndsOnClose(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	s, err := rt.CreateSession(t.Context(), &lt.CreateSessionRequest{AgentSpec: new(scripted(`[{"text":"hi"}]`)), Input: "hi"})
	require.NoError(t, err)
	waitStatus(t, rt, s.ID, lt.SessionIdle)
	closed := make(chan error, 1)
	var errs []error
	for ev, err := range rt.Subscribe(t.Context(), s.ID, 0) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ev.Type == lt.EventTurnCompleted {
			go func() { closed <- rt.Close(context.WithoutCancel(t.Context())) }()
		}
	}
	require.NoError(t, <-closed)
	require.Len(t, errs, 1)
	// The stream learns it either from the engine's watch closing or from
	// a read it had started failing on the closed store.
	if !errors.Is(errs[0], store.ErrClosed) {
		require.EqualError(t, errs[0], "subscribe to "+s.ID+": the runtime is closing")
	}
}

// TestRuntimePollInterval: the Runtime's streams read their journals again
// every 2 s without a notice (notices are hints a busy process may miss),
// as the library's Subscribe always has, not at the HTTP API's ping
// interval (15 s).
func TestRuntimePollInterval(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	require.Equal(t, 2*time.Second, longhaul.PollInterval(rt))
}

// TestRuntimeOnPostgreSQL runs a session with a Go tool on PostgreSQL, and
// resumes it from a second runtime (another data directory, another node)
// on the same schema.
func TestRuntimeOnPostgreSQL(t *testing.T) {
	t.Parallel()
	dsn := pgtest.FreshSchema(t)
	var runs atomic.Int32
	echo := longhaul.Tool("echo", "Echo.", lt.EffectRead,
		func(ctx context.Context, call longhaul.ToolCall, in fetchIn) (fetchIn, error) {
			runs.Add(1)
			return in, nil
		})
	agents := []lt.PutAgentRequest{{Name: "echoer", Spec: scripted(`[
		{"tool_calls":[{"name":"echo","arguments":{"url":"u"}}]},
		{"text":"echoed"},
		{"text":"again"}]`, echo.Spec())}}
	a := open(t, longhaul.Options{DataDir: t.TempDir(), PostgresURL: dsn, Agents: agents, Tools: []*longhaul.GoTool{echo}})
	s, err := a.CreateSession(t.Context(), &lt.CreateSessionRequest{Agent: "echoer", Input: "echo u"})
	require.NoError(t, err)
	waitStatus(t, a, s.ID, lt.SessionIdle)
	require.Equal(t, int32(1), runs.Load())

	b := open(t, longhaul.Options{DataDir: t.TempDir(), PostgresURL: dsn, Agents: agents, Tools: []*longhaul.GoTool{echo}})
	require.NotEqual(t, a.NodeID(), b.NodeID())
	_, err = b.CreateTurn(t.Context(), s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	waitStatus(t, b, s.ID, lt.SessionIdle)
	turns, err := a.ListTurns(t.Context(), s.ID)
	require.NoError(t, err)
	require.Len(t, turns.Data, 2)
	require.Equal(t, "again", turns.Data[1].Output)
}

// TestListenAddrsAreTheControlPlane: the addresses Handler is served on are
// refused to sessions, as a model's base_url too.
func TestListenAddrsAreTheControlPlane(t *testing.T) {
	t.Parallel()
	rt, err := longhaul.Open(t.Context(), longhaul.Options{DataDir: t.TempDir(), Logger: quiet, ListenAddrs: []string{"127.0.0.1:18089"}})
	require.NoError(t, err)
	defer rt.Close(t.Context())
	_, err = rt.CreateSession(t.Context(), &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "openai-compatible", Name: "m", BaseURL: "http://localhost:18089/v1"}},
		Input:     "hi",
	})
	require.ErrorContains(t, err, "the server's own API")
	require.ErrorContains(t, err, "agent_spec.model.base_url")
}

// TestRuntimeListEventsLimit: the library refuses a page size out of range
// before it reads anything, with the client's words.
func TestRuntimeListEventsLimit(t *testing.T) {
	ctx := t.Context()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	_, err := rt.ListEvents(ctx, "ses_x", 0, client.MaxListLimit+1)
	require.EqualError(t, err, "list events of ses_x: limit 501 is outside 0..500")
	_, err = rt.ListEvents(ctx, "ses_x", 0, -1)
	require.EqualError(t, err, "list events of ses_x: limit -1 is outside 0..500")
}
