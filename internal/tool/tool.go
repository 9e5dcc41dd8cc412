package tool

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Tool is a callable tool.
type Tool interface {
	Name() string
	Description() string
	// Parameters is the JSON schema of the arguments object.
	Parameters() json.RawMessage
	// Effect is the default effect class; an agent may override it.
	Effect() lt.EffectClass
	// Run executes one call. A tool-level failure the model should see (bad
	// path, non-zero exit is NOT one: see shell) is returned as Result.Error;
	// a Go error means the tool could not run at all (it is reported to the
	// model as an error too, and logged).
	Run(ctx context.Context, call *Call) (*Result, error)
}

// Reconciler is implemented by a tool that can find out whether a call of
// it took effect when the journal does not know: its worker died after the
// effect was in the ledger (tool.started) and before the outcome was. The
// engine asks it before raising an in_doubt action for an irreversible
// call, with the same Call (arguments, idempotency key, session,
// workspace) the lost attempt had. A tool that can look its effects up by
// that key (a payment provider's charge, a sent message's id) settles
// such calls itself; a person is asked only when it cannot.
type Reconciler interface {
	// Reconcile reports whether the call took effect. An error means it
	// cannot tell (the lookup failed): the engine then raises the in_doubt
	// action, with the error as evidence. It must not perform the effect.
	Reconcile(ctx context.Context, call *Call) (*Reconciliation, error)
}

// WorkspaceFree is implemented by a tool that never reads or writes the
// session's workspace (it calls a service, or computes): its calls get no
// Workspace path, and the engine keeps no watch over the workspace for
// them, as it must for a tool that may open it behind the Environment's
// back (a checkpoint walks it after such a call).
type WorkspaceFree interface {
	WorkspaceFree() bool
}

// IsWorkspaceFree reports whether t says it never touches the workspace.
func IsWorkspaceFree(t Tool) bool {
	f, ok := t.(WorkspaceFree)
	return ok && f.WorkspaceFree()
}

// Reconciliation is a Reconciler's answer.
type Reconciliation struct {
	// Happened: the call took effect. The engine records it as completed
	// with Output as its result (resolution "reconciled"). Otherwise the
	// engine runs the call again, with the same idempotency key.
	Happened bool
	// Output is the call's result when it happened, marshalled to JSON as
	// Result.Output is.
	Output any
}

// Call is one invocation.
type Call struct {
	SessionID string
	// Workspace is the absolute path of the session's workspace directory.
	Workspace string
	Arguments json.RawMessage
	// IdempotencyKey is derived from (session, turn, step, call index): the
	// same on every attempt of this call.
	IdempotencyKey string
	// Timeout bounds the call (0: the tool's default).
	Timeout time.Duration
	// MaxOutputBytes bounds captured output (0: the tool's default).
	MaxOutputBytes int
	// Effect is the effect class the engine decided for this call (after
	// the agent's override and, for http_request, HTTPRequestEffect).
	// Empty: the tool's Effect(). http_request sends IdempotencyKey in an
	// Idempotency-Key header only when this is idempotent.
	Effect lt.EffectClass

	// Files is the session's workspace as the file tools reach it (the
	// session's Environment, which may be on another machine). Nil: they
	// open Workspace themselves (tests, embedding).
	Files Files
	// Exec runs programs for tools that execute them (shell) in the
	// session's sandbox. Nil: the tool runs them as plain subprocesses
	// confined only to the workspace directory (tests, embedding).
	Exec Exec
	// SQLite runs sqlite_query where the workspace is (the session's
	// Environment). Nil: the tool opens Workspace itself.
	SQLite SQLite
	// Network is the session's network allowlist, for tools that reach the
	// network from the server (http_request). Nil: no network.
	Network *NetworkPolicy
	// Secrets gives tools that run outside the sandbox (http_request) the
	// credentials bound to a host. Nil: none.
	Secrets SecretSource
	// OnNetwork receives every connection decision made for this call;
	// the engine journals them with the call's outcome.
	OnNetwork func(NetworkEvent)
	// Browser is the session's browser (the browser tool drives it). Nil:
	// the server runs none for this session.
	Browser BrowserDriver
	// SaveArtifact stores data as an artifact of the session (not a final
	// one) and returns its id: the browser's screenshots. Nil: none can be
	// stored.
	SaveArtifact func(ctx context.Context, name string, data []byte, contentType string) (string, error)
}

// Exec runs one program in a session's environment.
type Exec interface {
	Run(ctx context.Context, req *ExecRequest) (*ExecResult, error)
}

// Files are the file operations of a session's workspace, with
// workspace.Dir's semantics: paths are workspace-relative and confined to
// it (workspace.ErrEscapes, workspace.ErrInvalidPath, fs.ErrNotExist),
// and errors name only those paths. WriteFile is atomic and checks the
// workspace's disk quota itself. An error wrapping ErrEnvironment is the
// environment's (unreachable, lost mid-call, closed), not the call's: a
// tool returns it as its Go error, never to the model.
type Files interface {
	ReadFile(ctx context.Context, rel string, offset, limit int64) (*workspace.ReadResult, error)
	WriteFile(ctx context.Context, rel string, data []byte) error
	List(ctx context.Context, rel string, max int) (*workspace.Listing, error)
}

// ErrEnvironment marks an error of a call's Files that is its
// environment's failure, not the call's (see Files).
var ErrEnvironment = errors.New("the session's environment failed")

// fileError is what a file tool makes of err, an error of its workspace:
// the model's to read (a Result error), unless it is the environment's.
func fileError(err error) (*Result, error) {
	if errors.Is(err, ErrEnvironment) {
		return nil, err
	}
	return &Result{Error: err.Error()}, nil
}

// DiskQuota is implemented by an Exec that bounds the disk use of the
// session's workspace (the sandbox's environment.disk_mb). The file tools
// ask it before they write: CheckWrite returns an error, for the model,
// when writing size more bytes would take the workspace over its quota,
// or when the workspace cannot be measured against it (an error that is
// ErrUnmeasurable: the quota fails closed).
type DiskQuota interface {
	CheckWrite(size int64) error
}

// ErrUnmeasurable is a write refused because the workspace cannot be
// measured against its disk quota (directories nested past what the walk
// measures, directories nobody may read), not because it is over it.
var ErrUnmeasurable = errors.New("the workspace cannot be measured against its disk quota")

// checkDiskQuota asks the call's Exec, when it bounds the workspace, whether
// size more bytes may be written.
func checkDiskQuota(call *Call, size int64) error {
	if q, ok := call.Exec.(DiskQuota); ok {
		return q.CheckWrite(size)
	}
	return nil
}

// ExecRequest is one program run: Command is run by `sh -c` in the
// workspace.
type ExecRequest struct {
	Command        string
	Env            map[string]string
	Timeout        time.Duration
	MaxOutputBytes int
}

// ExecResult is how a program run ended. A non-zero exit is a result, not
// an error; an error means the program could not be run at all.
type ExecResult struct {
	ExitCode  int    `json:"exit_code"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated"`
	TimedOut  bool   `json:"timed_out"`
	Signal    string `json:"signal,omitempty"`
	// Limit names the resource limit that ended the program, if one did
	// (cpu, memory, processes, output, wall, file_size, disk).
	Limit string `json:"limit,omitempty"`
	// Error, when set, fails the call with this message for the model
	// (the workspace over its disk quota), whatever the exit code.
	Error string `json:"error,omitempty"`
}

// NetworkPolicy says which hosts a session may reach (environment.network).
type NetworkPolicy struct {
	// Allow lists host names (exact, or "*.example.com" for subdomains),
	// or IP literals, that may be reached. Private, loopback, link-local
	// and metadata addresses are refused unless listed literally.
	Allow []string `json:"allow"`
	// Ports are the destination ports allowed (default 80 and 443).
	Ports []int `json:"ports,omitempty"`
	// ControlPlane holds the server's own addresses (its nodes' API
	// listeners, its database): refused whatever Allow lists. Nil: none
	// (tests, embedding without a listener).
	ControlPlane *egress.ControlPlane `json:"-"`
}

// NetworkEvent is one connection decision.
type NetworkEvent struct {
	// Via is "proxy" (from the sandbox), "http_request" or "mcp".
	Via     string `json:"via"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Address string `json:"address,omitempty"` // the IP dialled, when allowed
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
}

// SecretSource resolves the credentials a session may use.
type SecretSource interface {
	// ForHost returns the credentials bound to host among the secrets the
	// agent names; values never leave the server except in requests to
	// their hosts. host is a request's host and port ("api.example.com:443",
	// "[::1]:8443"), so that a secret bound to one port of a host goes to
	// that port only.
	ForHost(host string) []Credential
}

// Credential is a secret ready to inject into a request: the header and its
// formatted value.
type Credential struct {
	Name   string
	Header string
	Value  string
}

// Result is what the model gets back: Output on success, Error otherwise.
type Result struct {
	Output any    `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
	// Transient marks an Error that may not happen again (a timeout, a
	// reset connection, a 429 or 5xx from a remote service): the engine
	// retries the call if its effect class allows it (never irreversible).
	Transient bool `json:"-"`
	// RetryAfter is how long the remote side asked to wait, if it said.
	RetryAfter time.Duration `json:"-"`
}

// Registry maps names to tools.
type Registry struct {
	tools map[string]Tool
}

// NewRegistry returns a registry holding tools. It panics on a duplicate name
// (a programmer error at registration).
func NewRegistry(tools ...Tool) *Registry {
	r := &Registry{tools: make(map[string]Tool)}
	for _, t := range tools {
		r.Register(t)
	}
	return r
}

// Register adds t; it panics if the name is taken.
func (r *Registry) Register(t Tool) {
	if _, dup := r.tools[t.Name()]; dup {
		panic("tool: duplicate tool name " + t.Name())
	}
	r.tools[t.Name()] = t
}

// Get returns the tool named name.
func (r *Registry) Get(name string) (Tool, bool) {
	t, ok := r.tools[name]
	return t, ok
}
