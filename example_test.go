package longhaul_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync"
	"time"

	"github.com/longhaul-dev/longhaul"
	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The engine runs in-process on SQLite in a data directory, with a tool
// written in Go. The scripted model provider plays the model's answers, so
// the output is always the same.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "longhaul-example-*")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	type addIn struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	type addOut struct {
		Sum int `json:"sum"`
	}
	add := longhaul.Tool("add", "Add two integers.", lt.EffectRead,
		func(ctx context.Context, call longhaul.ToolCall, in addIn) (addOut, error) {
			return addOut{Sum: in.A + in.B}, nil
		})

	rt, err := longhaul.Open(ctx, longhaul.Options{
		DataDir: dir, // SQLite in dir/longhaul.db; PostgresURL selects PostgreSQL
		Logger:  slog.New(slog.DiscardHandler),
		Tools:   []*longhaul.GoTool{add},
		Agents: []lt.PutAgentRequest{{Name: "calculator", Spec: lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[
				{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 40}}]},
				{"text": "2 + 40 = 42"}]`)},
			Instructions: "Use the add tool for sums.",
			Tools:        []lt.ToolSpec{add.Spec()},
		}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(ctx)

	s, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{Agent: "calculator", Input: "What is 2 + 40?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for ev, err := range rt.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch ev.Type {
		case lt.EventToolCompleted:
			var d lt.ToolCompletedData
			_ = json.Unmarshal(ev.Data, &d)
			fmt.Println(d.Tool, "->", string(d.Output))
		case lt.EventTurnCompleted:
			turn, err := rt.GetTurn(ctx, s.ID, ev.TurnID)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Println("answer:", turn.Output)
			return
		}
	}
	// Output:
	// add -> {"sum":42}
	// answer: 2 + 40 = 42
}

// A tool written in Go: the JSON schema of its arguments comes from its
// input type, and what it returns is the call's result.
func ExampleTool() {
	type weatherIn struct {
		City string `json:"city" jsonschema:"the city, in English"`
		Days int    `json:"days,omitempty" jsonschema:"how many days ahead (default 1)"`
	}
	type weatherOut struct {
		Forecast []string `json:"forecast"`
	}
	weather := longhaul.Tool("weather", "Get the weather forecast of a city.", lt.EffectRead,
		func(ctx context.Context, call longhaul.ToolCall, in weatherIn) (weatherOut, error) {
			if in.City == "" {
				return weatherOut{}, fmt.Errorf("which city?") // the model sees this error
			}
			return weatherOut{Forecast: []string{"sunny"}}, nil
		})

	// An agent enables it by name, like a built-in tool.
	spec, _ := json.Marshal(weather.Spec())
	fmt.Println(string(spec))
	fmt.Println(weather.Effect())
	fmt.Println(string(weather.Parameters()))
	// Output:
	// {"name":"weather"}
	// read
	// {"type":"object","properties":{"city":{"type":"string","description":"the city, in English"},"days":{"type":"integer","description":"how many days ahead (default 1)"}},"required":["city"],"additionalProperties":false}
}

// An irreversible tool with a reconcile probe. Here the process dies while
// the tool charges a card: the charge went through, but the journal does
// not know. At the next start the engine asks the probe, which finds the
// charge by the call's idempotency key, and records it; no one is asked,
// and the card is charged once.
func ExampleWithReconcile() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "longhaul-example-*")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	// payments stands for a payment service that keeps each charge under
	// the idempotency key it was made with.
	var mu sync.Mutex
	payments := map[string]string{}
	crash := make(chan struct{})
	var crashOnce sync.Once

	type chargeIn struct {
		Customer  string `json:"customer"`
		AmountEUR int    `json:"amount_eur"`
	}
	type chargeOut struct {
		ChargeID string `json:"charge_id"`
	}
	charge := longhaul.Tool("charge_card", "Charge the customer's card.", lt.EffectIrreversible,
		func(ctx context.Context, call longhaul.ToolCall, in chargeIn) (chargeOut, error) {
			mu.Lock()
			payments[call.IdempotencyKey] = fmt.Sprintf("ch_%d", len(payments)+1)
			mu.Unlock()
			// The charge went through; the process dies before the engine
			// records the outcome.
			crashOnce.Do(func() { close(crash) })
			<-ctx.Done()
			return chargeOut{}, ctx.Err()
		},
		longhaul.WithReconcile(func(ctx context.Context, call longhaul.ToolCall, in chargeIn) (bool, chargeOut, error) {
			mu.Lock()
			defer mu.Unlock()
			id, found := payments[call.IdempotencyKey]
			return found, chargeOut{ChargeID: id}, nil
		}))

	open := func() (*longhaul.Runtime, error) {
		return longhaul.Open(ctx, longhaul.Options{
			DataDir: dir,
			Logger:  slog.New(slog.DiscardHandler),
			Tools:   []*longhaul.GoTool{charge},
			Agents: []lt.PutAgentRequest{{Name: "billing", Spec: lt.AgentSpec{
				Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[
					{"tool_calls": [{"name": "charge_card", "arguments": {"customer": "ACME", "amount_eur": 42}}]},
					{"text": "Charged ACME 42 EUR."}]`)},
				Tools: []lt.ToolSpec{charge.Spec()},
			}}},
		})
	}
	rt, err := open()
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{Agent: "billing", Input: "Charge ACME 42 EUR"})
	if err != nil {
		fmt.Println(err)
		return
	}
	<-crash
	// The crash: a Close whose deadline has passed cuts the running call.
	dead, cancel := context.WithDeadline(ctx, time.Now())
	cancel()
	_ = rt.Close(dead)

	// The next start resumes the session.
	rt, err = open()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(ctx)
	for ev, err := range rt.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		if ev.Type == lt.EventTurnCompleted {
			break
		}
	}
	effects, err := rt.ListEffects(ctx, s.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range effects.Data {
		fmt.Println(e.Tool, e.Status, e.Resolution)
	}
	actions, _ := rt.ListActions(ctx, s.ID, "")
	fmt.Println("required actions:", len(actions.Data))
	fmt.Println("charges:", len(payments))
	// Output:
	// charge_card resolved reconciled
	// required actions: 0
	// charges: 1
}

// An application function answered in-process. The agent's call becomes a
// function_call required action, which the runtime hands to the Go
// function and decides with its result; a call still pending when the
// process stops is handed over again at the next start.
func ExampleFunction() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "longhaul-example-*")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	type customerIn struct {
		Name string `json:"name"`
	}
	type customerOut struct {
		Plan  string `json:"plan"`
		Seats int    `json:"seats"`
	}
	lookup := longhaul.Function("lookup_customer", "Look a customer up in the CRM.", lt.EffectRead,
		func(ctx context.Context, call longhaul.FunctionCall, in customerIn) (customerOut, error) {
			return customerOut{Plan: "enterprise", Seats: 120}, nil
		})

	rt, err := longhaul.Open(ctx, longhaul.Options{
		DataDir:   dir,
		Logger:    slog.New(slog.DiscardHandler),
		Functions: []*longhaul.GoFunction{lookup},
		Agents: []lt.PutAgentRequest{{Name: "account-manager", Spec: lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[
				{"tool_calls": [{"name": "lookup_customer", "arguments": {"name": "ACME"}}]},
				{"text": "ACME has 120 seats on the enterprise plan."}]`)},
			Tools: []lt.ToolSpec{lookup.Spec()},
		}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(ctx)

	s, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{Agent: "account-manager", Input: "How big is ACME?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for ev, err := range rt.Subscribe(ctx, s.ID, 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch ev.Type {
		case lt.EventActionRequired:
			var d lt.ActionRequiredData
			_ = json.Unmarshal(ev.Data, &d)
			fmt.Println("required:", d.Action.Type, d.Action.Tool, string(d.Action.Arguments))
		case lt.EventToolCompleted:
			var d lt.ToolCompletedData
			_ = json.Unmarshal(ev.Data, &d)
			fmt.Println("output:", string(d.Output))
		case lt.EventTurnCompleted:
			turn, _ := rt.GetTurn(ctx, s.ID, ev.TurnID)
			fmt.Println("answer:", turn.Output)
			return
		}
	}
	// Output:
	// required: function_call lookup_customer {"name":"ACME"}
	// output: {"plan":"enterprise","seats":120}
	// answer: ACME has 120 seats on the enterprise plan.
}

// Subscribe follows a session's journal across turns, and resumes after
// any event it yielded: here, a second subscription picks up after the
// first turn, for the follow-up turn.
func ExampleRuntime_Subscribe() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "longhaul-example-*")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	rt, err := longhaul.Open(ctx, longhaul.Options{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(ctx)

	// An inline agent, defined with the session.
	s, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted",
			Script: json.RawMessage(`[{"text": "Hello."}, {"text": "Hello again."}]`)}},
		Input: "Say hello",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// follow prints the turns' ends until one completes, and returns the
	// seq of that event.
	follow := func(after int64) int64 {
		for ev, err := range rt.Subscribe(ctx, s.ID, after) {
			if err != nil {
				fmt.Println(err)
				return 0
			}
			switch ev.Type {
			case lt.EventTurnCreated, lt.EventTurnStarted:
				fmt.Println(ev.Seq > after, ev.Type)
			case lt.EventTurnCompleted:
				var d lt.TurnCompletedData
				_ = json.Unmarshal(ev.Data, &d)
				fmt.Println(ev.Seq > after, ev.Type, d.Output)
				return ev.Seq
			}
		}
		return 0
	}
	last := follow(0)
	if _, err := rt.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "Again"}); err != nil {
		fmt.Println(err)
		return
	}
	follow(last)
	// Output:
	// true turn.created
	// true turn.started
	// true turn.completed Hello.
	// true turn.created
	// true turn.started
	// true turn.completed Hello again.
}

// Handler serves the runtime's HTTP API (and web UI), so the CLI, the web
// UI and package client reach the sessions of an embedded engine.
func ExampleRuntime_Handler() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "longhaul-example-*")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	rt, err := longhaul.Open(ctx, longhaul.Options{
		DataDir: dir,
		Logger:  slog.New(slog.DiscardHandler),
		Agents: []lt.PutAgentRequest{{Name: "greeter", Spec: lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text": "Hello."}]`)},
		}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(ctx)
	srv := httptest.NewServer(rt.Handler()) // or an http.Server of your own
	defer srv.Close()

	c, err := client.New(srv.URL, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	agents, err := c.ListAgents(ctx, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range agents.Data {
		fmt.Println(a.Name, a.Version)
	}
	// An unknown session: the same error, in-process or over HTTP.
	_, remote := c.GetSession(ctx, "ses_unknown")
	_, local := rt.GetSession(ctx, "ses_unknown")
	fmt.Println(client.IsNotFound(remote), client.IsNotFound(local))
	// Output:
	// greeter 1
	// true true
}
