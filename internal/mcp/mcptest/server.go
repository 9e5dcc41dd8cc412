package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeEnv, set to "1" in a test binary's environment, makes MaybeServe
// serve MCP over stdio instead of running the tests.
const ServeEnv = "LONGHAUL_MCPTEST_SERVE"

// PIDLog is the file, in its working directory, to which a stdio test
// server appends its process id when it starts: tests check that the
// servers of a session that waits are gone.
const PIDLog = "mcptest-pids.log"

// QuietEnv, set to "1" beside ServeEnv, makes the stdio server write no
// PIDLog at its start: a workspace it is started in stays empty until a
// call writes.
const QuietEnv = "LONGHAUL_MCPTEST_QUIET"

// CallLog is the file, in the server's working directory (the session's
// workspace for a stdio server), to which every call of record, crash_once
// and exit_always appends a line: the tool, the idempotency key it
// carried, and what it did.
const CallLog = "mcptest-calls.log"

// KeyMeta is the _meta key the engine sends the idempotency key in (kept in
// step with internal/mcp.IdempotencyKeyMeta by the tests).
const KeyMeta = "dev.longhaul/idempotency-key"

// Options shape the test server.
type Options struct {
	// Crash ends the server's connection in the middle of a call of
	// crash_once or exit_always. In a subprocess it is os.Exit; in-process
	// it closes the server's session.
	Crash func()
	// Dir is where CallLog is written ("" : the working directory).
	Dir string
}

// NewServer returns the test server with its tools:
//
//	echo         {text}  -> "echo: TEXT"                (annotations: read-only)
//	add          {a, b}  -> structured {"sum": A+B}     (annotations: idempotent)
//	fail         {}      -> an isError result
//	refuse       {}      -> a JSON-RPC error (-32000)
//	record       {note}  -> logs the call and answers   (no annotations)
//	crash_once   {note}  -> the first call with a key crashes, a repeat answers
//	exit_always  {}      -> crashes on every call
//	hang         {}      -> never answers; logs when it starts and when it is cancelled
func NewServer(opts Options) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "mcptest", Version: "1.0.0"}, nil)
	yes := true
	obj := func(props string, required ...string) json.RawMessage {
		req, _ := json.Marshal(required)
		if len(required) == 0 {
			req = []byte("[]")
		}
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
	}
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	args := func(req *sdk.CallToolRequest) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &m)
		return m
	}
	key := func(req *sdk.CallToolRequest) string {
		k, _ := req.Params.Meta[KeyMeta].(string)
		return k
	}
	logCall := func(tool, key, what string) {
		f, err := os.OpenFile(filepath.Join(opts.Dir, CallLog), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		fmt.Fprintf(f, "%s %s %s\n", tool, key, what)
		f.Close()
	}
	crash := func() {
		if opts.Crash != nil {
			opts.Crash()
		}
	}

	s.AddTool(&sdk.Tool{
		Name: "echo", Description: "Echo the text back.", InputSchema: obj(`"text":{"type":"string"}`, "text"),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return text(fmt.Sprintf("echo: %v", args(req)["text"])), nil
	})
	s.AddTool(&sdk.Tool{
		Name: "add", Description: "Add two numbers.", InputSchema: obj(`"a":{"type":"number"},"b":{"type":"number"}`, "a", "b"),
		Annotations: &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: &yes},
	}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		a, _ := args(req)["a"].(float64)
		b, _ := args(req)["b"].(float64)
		res := text(fmt.Sprint(a + b))
		res.StructuredContent = map[string]any{"sum": a + b}
		return res, nil
	})
	s.AddTool(&sdk.Tool{Name: "fail", Description: "Fail.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "it failed as asked"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "refuse", Description: "Answer with a protocol error.", InputSchema: obj("")},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: -32000, Message: "refused by the test server"}
		})
	s.AddTool(&sdk.Tool{Name: "record", Description: "Record a note.", InputSchema: obj(`"note":{"type":"string"}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			logCall("record", key(req), fmt.Sprint(args(req)["note"]))
			return text("recorded"), nil
		})
	s.AddTool(&sdk.Tool{Name: "crash_once", Description: "Crash on the first call with a key.", InputSchema: obj(`"note":{"type":"string"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			marker := filepath.Join(opts.Dir, "mcptest-crashed-"+filepath.Base(key(req)))
			if _, err := os.Stat(marker); err != nil {
				_ = os.WriteFile(marker, nil, 0o600)
				logCall("crash_once", key(req), "crashed")
				crash()
				<-ctx.Done() // the crash ended the connection: never answer
				return nil, ctx.Err()
			}
			logCall("crash_once", key(req), "answered")
			return text("done after a crash"), nil
		})
	s.AddTool(&sdk.Tool{Name: "exit_always", Description: "Crash on every call.", InputSchema: obj("")},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			logCall("exit_always", key(req), "crashed")
			crash()
			<-ctx.Done()
			return nil, ctx.Err()
		})
	s.AddTool(&sdk.Tool{Name: "hang", Description: "Never answer.", InputSchema: obj("")},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			logCall("hang", key(req), "started")
			<-ctx.Done()
			// The client's notifications/cancelled ends ctx: logged, so a
			// test can tell a call cancelled per the protocol from a
			// server that was just killed.
			logCall("hang", key(req), "cancelled")
			return nil, ctx.Err()
		})
	return s
}

// MaybeServe serves the test server over stdio and exits when ServeEnv is
// set; it returns at once otherwise. Call it first in TestMain. The
// server's crashes are os.Exit(3), so the process dies mid-call.
func MaybeServe() {
	if os.Getenv(ServeEnv) != "1" {
		return
	}
	if os.Getenv(QuietEnv) != "1" {
		if f, err := os.OpenFile(PIDLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintln(f, os.Getpid())
			f.Close()
		}
	}
	s := NewServer(Options{Crash: func() {
		fmt.Fprintln(os.Stderr, "mcptest: crashing as asked")
		os.Exit(3)
	}})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
