package engine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/mcp"
	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Vault is where agents' environment.secrets resolve (internal/vault
// implements it). Values never leave the server but in requests to the
// hosts a secret is bound to. Every lookup is in one project ("": the
// default): an agent's secrets are those of its project when it is
// defined, a session's those of the session's project when it runs, and a
// name only another project has is unknown.
type Vault interface {
	// Source returns the credentials of the named secrets of project, by
	// host; an unknown name is an error naming it.
	Source(ctx context.Context, project string, names []string) (tool.SecretSource, error)
	// Require checks that the named secrets exist in project (without
	// decrypting); the first unknown one is an error naming it.
	Require(ctx context.Context, project string, names []string) error
	// CheckBound checks, without decrypting, that a secret exists in
	// project and that dest (host:port) is one of its hosts (a model's
	// api_key_secret); errors as ValueFor's.
	CheckBound(ctx context.Context, project, name, dest string) error
	// ValueFor returns the value of a secret of project for a request to
	// dest (host:port) only if dest is one of its hosts now: an unknown
	// name is an error with an UnknownSecret() method, an unbound
	// destination one with a NotBound() method.
	ValueFor(ctx context.Context, project, name, dest string) (string, error)
	// Login returns a login secret of project (inject {"login": …}) for a
	// login page at dest (host:port) only if dest is one of its hosts:
	// errors as ValueFor's, and one with a NotLogin() method for a secret
	// that is not a login.
	Login(ctx context.Context, project, name, dest string) (*tool.LoginSecret, error)
	// Redactor returns the redactor of every secret's value, of every
	// project (cached until
	// Invalidate).
	Redactor(ctx context.Context) (*redact.Redactor, error)
	// Invalidate drops what the vault cached, after its secrets changed.
	Invalidate()
}

// redactor returns what removes secret values from everything the engine
// writes. With a vault whose values cannot be read (a wrong key), it
// fails closed: nothing is written.
func (e *Engine) redactor(ctx context.Context) (*redact.Redactor, error) {
	if e.cfg.Vault == nil {
		return nil, nil
	}
	r, err := e.cfg.Vault.Redactor(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the secrets to redact: %w", err)
	}
	return r, nil
}

var secretName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// validateEnvironment checks an agent's environment: the network allowlist
// compiles, and every secret it names exists in the vault.
// maxDiskMB bounds environment.disk_mb (1 TiB).
const maxDiskMB = 1 << 20

// maxIdleStopSeconds bounds environment.idle_stop_seconds (30 days).
const maxIdleStopSeconds = 30 * 24 * 3600

// sandboxLimits are the limits an agent's environment sets on its sandbox:
// its workspace quota (zero fields take the backend's defaults).
func sandboxLimits(env *lt.Environment) sandbox.Limits {
	if env == nil {
		return sandbox.Limits{}
	}
	return sandbox.Limits{DiskBytes: int64(env.DiskMB) << 20}
}

// runnerName is what a runner's name and labels are (link.CheckName's
// rule, which the runner's Hello is held to).
var runnerName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// maxRunnerLabels is link.MaxLabels: a runner has at most as many.
const maxRunnerLabels = 32

// validateRunner checks environment.runner: exactly one of a name and a
// non-empty list of labels, each a valid runner name.
func validateRunner(sel *lt.RunnerSelector, prefix string) error {
	if sel == nil {
		return nil
	}
	switch {
	case sel.Name != "" && len(sel.Labels) > 0:
		return apierror.Invalid(prefix, "give either name or labels, not both")
	case sel.Name == "" && len(sel.Labels) == 0:
		return apierror.Invalid(prefix, "give a runner's name or a list of labels")
	case sel.Name != "":
		if !runnerName.MatchString(sel.Name) {
			return apierror.Invalid(prefix+".name", "must be a runner's name: 1 to 63 of a-z, 0-9 and (not first) '.', '_', '-'")
		}
		return nil
	}
	if len(sel.Labels) > maxRunnerLabels {
		return apierror.Invalid(prefix+".labels", "at most %d labels", maxRunnerLabels)
	}
	seen := map[string]bool{}
	for i, l := range sel.Labels {
		f := fmt.Sprintf("%s.labels[%d]", prefix, i)
		if !runnerName.MatchString(l) {
			return apierror.Invalid(f, "must be a label: 1 to 63 of a-z, 0-9 and (not first) '.', '_', '-'")
		}
		if seen[l] {
			return apierror.Invalid(f, "%q is given twice", l)
		}
		seen[l] = true
	}
	return nil
}

func (e *Engine) validateEnvironment(ctx context.Context, project string, env *lt.Environment, prefix string) error {
	if env == nil {
		return nil
	}
	if n := env.Network; n != nil {
		if _, err := egress.NewPolicy(n.Allow); err != nil {
			return apierror.Invalid(prefix+".network.allow", "%v", err)
		}
		for i, p := range n.Ports {
			if p < 1 || p > 65535 {
				return apierror.Invalid(fmt.Sprintf("%s.network.ports[%d]", prefix, i), "must be a TCP port (1 to 65535)")
			}
		}
	}
	if err := validateRunner(env.Runner, prefix+".runner"); err != nil {
		return err
	}
	if env.IdleStopSeconds < 0 || env.IdleStopSeconds > maxIdleStopSeconds {
		return apierror.Invalid(prefix+".idle_stop_seconds", "must be between 0 (never stopped) and %d seconds (30 days)", maxIdleStopSeconds)
	}
	if err := validateBrowserSpec(env.Browser, prefix+".browser"); err != nil {
		return err
	}
	if env.DiskMB < 0 || env.DiskMB > maxDiskMB {
		return apierror.Invalid(prefix+".disk_mb", "must be between 0 (the server's default) and %d MiB", maxDiskMB)
	}
	for i, name := range env.Secrets {
		f := fmt.Sprintf("%s.secrets[%d]", prefix, i)
		if !secretName.MatchString(name) {
			return apierror.Invalid(f, "must be a secret's name (%s)", secretName)
		}
		if e.cfg.Vault == nil {
			return apierror.Invalid(f, "this server has no vault")
		}
		if err := e.cfg.Vault.Require(ctx, project, []string{name}); err != nil {
			var unknown interface{ UnknownSecret() string }
			if errors.As(err, &unknown) {
				return apierror.Invalid(f, "%v", err)
			}
			return err
		}
	}
	return nil
}

// sessionEnv is what a runner sets up for a session's tools: the
// session's Environment (its workspace, sandbox and egress proxy, opened
// from the engine's backend), the network policy the server applies to
// what it sends itself (http_request, MCP over HTTP), and the secrets it
// may use.
type sessionEnv struct {
	policy  *egress.Policy
	network *tool.NetworkPolicy
	secrets tool.SecretSource
	// env is the session's Environment; nil only when it could not be
	// opened (setupEnvironment's error then fails the turn).
	env environment.Environment
	// exec runs the shell tool's programs: env, unless the engine runs
	// them as plain subprocesses (runsPrograms).
	exec tool.Exec
	// files are env's file operations, as the file tools use them.
	files tool.Files
	// mcp holds the clients of the agent's MCP servers (nil: none); it
	// lives as long as the runner, like the Environment.
	mcp *mcp.Manager
	// browser drives the session's browser (nil: the agent has none);
	// stopBrowser stops it, when this runner may have started one.
	browser     tool.BrowserDriver
	stopBrowser func()

	mu     sync.Mutex
	events []tool.NetworkEvent // connection decisions not journaled yet
}

func (v *sessionEnv) observe(ev tool.NetworkEvent) {
	v.mu.Lock()
	v.events = append(v.events, ev)
	v.mu.Unlock()
}

// drain returns and forgets the decisions made since the last drain.
func (v *sessionEnv) drain() []tool.NetworkEvent {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := v.events
	v.events = nil
	return out
}

func (v *sessionEnv) close() {
	if v == nil {
		return
	}
	// The browser and the servers first: they may be using the proxy.
	if v.stopBrowser != nil {
		v.stopBrowser()
	}
	if v.mcp != nil {
		v.mcp.Close()
	}
	if v.env != nil {
		_ = v.env.Close()
	}
}

// attach gives a built-in call the session's environment: where its
// programs run and its files are, and the network policy and secrets of
// what the server sends itself. observe: the call's own connection
// decisions are journaled with its outcome.
func (v *sessionEnv) attach(call *tool.Call, observe bool) {
	if v == nil {
		return
	}
	call.Exec, call.Files, call.Network, call.Secrets = v.exec, v.files, v.network, v.secrets
	if v.env != nil {
		// sqlite_query reads the database where the workspace is.
		call.SQLite = v.env
	}
	if observe {
		call.OnNetwork = v.observe
	}
	call.Browser = v.browser
}

// envFiles are an Environment's file operations as the file tools use them
// (tool.Files): the environment's own failures are marked
// tool.ErrEnvironment, so that a tool gives them to the engine (ErrLost:
// a crash of the call) rather than to the model.
type envFiles struct{ env environment.Environment }

func (f envFiles) ReadFile(ctx context.Context, rel string, offset, limit int64) (*workspace.ReadResult, error) {
	r, err := f.env.ReadFile(ctx, rel, offset, limit)
	return r, envFailure(err)
}

func (f envFiles) WriteFile(ctx context.Context, rel string, data []byte) error {
	return envFailure(f.env.WriteFile(ctx, rel, data))
}

func (f envFiles) List(ctx context.Context, rel string, max int) (*workspace.Listing, error) {
	l, err := f.env.List(ctx, rel, max)
	return l, envFailure(err)
}

// envFailure marks err tool.ErrEnvironment when it is the environment's
// failure rather than the file operation's.
func envFailure(err error) error {
	if err == nil {
		return nil
	}
	for _, failure := range []error{environment.ErrLost, environment.ErrUnavailable, environment.ErrClosed, environment.ErrBusy} {
		if errors.Is(err, failure) {
			return fmt.Errorf("%w: %w", tool.ErrEnvironment, err)
		}
	}
	return err
}

// runsPrograms reports whether the shell tool's programs run in the
// sessions' Environments; without a sandbox or a backend of its own, an
// engine runs them as plain subprocesses of the workspace (tests,
// embedding), as it always did.
func (e *Engine) runsPrograms() bool {
	return e.cfg.Sandbox != nil || e.cfg.Environments != nil
}

// confinesNetwork reports whether this session's programs reach the
// network only through the egress proxy: the answer of the backend its
// environment lives on (a runner's, when the router sends it to one), not
// that of this node's. A session bound for a runner not known yet gets the
// strictest answer (see environment.Router).
func (r *runner) confinesNetwork() bool {
	p := &environment.OpenParams{Workspace: r.st.WorkspaceID(), Session: r.st.Session.ID, Project: r.project}
	if spec := r.spec.Environment; spec != nil && spec.Runner != nil {
		p.Runner = &environment.RunnerSelector{Name: spec.Runner.Name, Labels: spec.Runner.Labels}
	}
	// The runner the environment is open on, when it is.
	p.Pinned = r.envRunner
	return environment.ConfinesNetworkOf(r.e.envs, p)
}

// setupEnvironment opens the session's environment for this claim. It
// lives as long as the runner: a waiting session holds none.
func (r *runner) setupEnvironment(ctx context.Context) error {
	env := &sessionEnv{}
	r.env = env
	spec := r.spec.Environment
	var network *environment.Network
	if spec != nil && spec.Network != nil && len(spec.Network.Allow) > 0 {
		// The server's own addresses are refused whatever the agent lists,
		// by every path out: the proxy, http_request and MCP over HTTP.
		p, err := egress.NewPolicy(spec.Network.Allow)
		if err == nil {
			p, err = p.WithConfig(egress.Config{Ports: spec.Network.Ports, ControlPlane: r.e.cfg.ControlPlane})
		}
		if err != nil {
			return fmt.Errorf("network policy: %w", err)
		}
		env.policy = p
		env.network = &tool.NetworkPolicy{Allow: spec.Network.Allow, Ports: spec.Network.Ports, ControlPlane: r.e.cfg.ControlPlane}
		network = &environment.Network{Allow: spec.Network.Allow, Ports: spec.Network.Ports, ControlPlane: r.e.cfg.ControlPlane, OnEvent: env.observe}
	}
	if spec != nil && len(spec.Secrets) > 0 {
		if r.e.cfg.Vault == nil {
			return fmt.Errorf("the agent names secrets but this server has no vault")
		}
		src, err := r.e.cfg.Vault.Source(ctx, r.project, spec.Secrets)
		if err != nil {
			return fmt.Errorf("secrets: %w", err)
		}
		env.secrets = src
	}
	params := &environment.OpenParams{
		Workspace: r.st.WorkspaceID(), Session: r.st.Session.ID, Limits: sandboxLimits(spec), Network: network,
		Snapshot: snapshotLimits, Project: r.project, Unshared: r.workspaceUnshared(),
	}
	params.Untouched = params.Unshared && r.workspaceUntouched()
	// This node's copy is the session's unless a runner holds it.
	r.untouched = params.Untouched && (spec == nil || spec.Runner == nil)
	if spec != nil && spec.Runner != nil {
		params.Runner = &environment.RunnerSelector{Name: spec.Runner.Name, Labels: spec.Runner.Labels}
		// Back to the runner that holds the workspace, whichever other
		// runner matches now.
		pin, err := r.e.environmentPin(ctx, r.st)
		if err != nil {
			return err
		}
		params.Pinned, params.PinnedKey = pin.runner, pin.key
		// An idle stop needs no slot of the runner: the parked session
		// holds none (only what Stop needs is allowed on it).
		params.ForStop = r.envForStop && pin.runner != ""
	}
	opened, err := r.e.envs.Open(ctx, params)
	if err != nil {
		return err
	}
	env.env, env.files = opened, envFiles{opened}
	r.envRunner, r.envRunnerKey = opened.Info().Runner, opened.Info().RunnerKey
	// A workspace the Environment had to make anew is checked against
	// the journal before the next tool runs (workspaceLost).
	r.provisioned = opened.Info().Provisioned
	if r.e.runsPrograms() {
		env.exec = opened
	}
	r.setupBrowser(env, opened)
	// MCP servers are started (or reached) when first needed, and stopped
	// with the environment when the runner parks or ends.
	m, err := r.newMCPManager(ctx, env)
	if err != nil {
		return err
	}
	env.mcp = m
	return nil
}

// workspaceUnshared reports whether no other session works in the
// session's workspace: it is not a sub-agent's (its root's), and the
// session has no spawn_agent to start one (its spec, and so its tools, are
// fixed for its life).
func (r *runner) workspaceUnshared() bool {
	if r.st.WorkspaceID() != r.st.Session.ID {
		return false
	}
	en, ok := r.tools.lookup(spawnAgentTool)
	return !ok || en.kind != lt.CallSpawn
}

// workspaceUntouched reports whether no tool of the session reaches its
// workspace: every entry of its agent is an application's function, a tool
// the engine runs on the session itself, or a built-in that says it never
// touches the workspace (tool.WorkspaceFree), and none of its MCP servers
// runs in the sandbox (stdio). The spec is fixed for the session's life.
// Only a person's change then writes into the workspace, so its directory
// may wait until something needs it (environment.OpenParams.Untouched).
func (r *runner) workspaceUntouched() bool {
	for _, s := range r.tools.servers {
		if s.Command != "" {
			return false
		}
	}
	for _, en := range r.tools.spec {
		switch en.ns {
		case nsFunction:
		case nsEngine:
			if en.kind == lt.CallSpawn {
				return false // a sub-agent shares the workspace
			}
		case nsBuiltin:
			if !tool.IsWorkspaceFree(en.builtin) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// journalNetwork records the connection decisions made while a call ran,
// before its outcome: every allowed and refused connection is in the
// journal.
func (r *runner) journalNetwork(c *journal.Call) error {
	if r.env == nil {
		return nil
	}
	for _, ev := range r.env.drain() {
		if err := r.add(lt.EventNetworkConnection, r.st.Step.TurnID, r.st.Step.N, lt.NetworkConnectionData{
			Step: r.st.Step.N, Index: c.Index, CallID: c.ID, Tool: c.Tool,
			Via: ev.Via, Host: ev.Host, Port: ev.Port, Address: ev.Address, Allowed: ev.Allowed, Reason: ev.Reason,
		}); err != nil {
			return err
		}
	}
	return nil
}

// environmentPin is where st's environment lives: the runner (and the key
// it connected with) of the last environment.opened of the session that
// owns the workspace, its root's for a sub-agent, which shares it. Both
// the open (setupEnvironment) and the wake (RunnerConnected) go by it, so
// a session is woken only by the runner its open goes to.
type environmentPin struct{ runner, key string }

func (e *Engine) environmentPin(ctx context.Context, st *journal.State) (environmentPin, error) {
	if root := st.WorkspaceID(); root != st.Session.ID {
		_, rootState, err := e.loadState(ctx, root)
		if err != nil {
			return environmentPin{}, fmt.Errorf("read the pin of the root session's environment: %w", err)
		}
		st = rootState
	}
	return environmentPin{st.EnvironmentRunner, st.EnvironmentRunnerKey}, nil
}
