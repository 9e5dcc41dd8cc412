package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// What an approval says the call can change: from its tool, its effect
// class and the session's environment, in words a person weighs.

// consequence says what a call can change if approved, from its tool, its
// effect class and the session's environment: whether a command is
// sandboxed, what network it has, which secrets a request carries, what the
// workspace holds.
func (ac *approvalContext) consequence(ctx context.Context, c *journal.Call) string {
	r := ac.r
	switch {
	case c.Kind == lt.CallBuiltin && c.Tool == "shell":
		return ac.commandConsequence(c.Class)
	case c.Kind == lt.CallBuiltin && (c.Tool == "write_file" || c.Tool == "edit_file"):
		var args struct {
			Path string `json:"path"`
		}
		_ = json.Unmarshal(c.Arguments, &args)
		return fmt.Sprintf("Changes only the workspace file %s; nothing leaves the workspace, and %s", args.Path, classWords(c.Class))
	case c.Kind == lt.CallBuiltin && c.Tool == "http_request":
		return ac.requestConsequence(ctx, c)
	case c.Kind == lt.CallFunction:
		return fmt.Sprintf("Your application performs %s once approved: Longhaul cannot see or limit what it does; %s", c.Tool, classWords(c.Class))
	case c.Kind == lt.CallMCP:
		return fmt.Sprintf("The MCP server %s runs its tool %s: Longhaul cannot see what it does beyond its answer; %s", r.mcpServerOf(c), c.Tool, classWords(c.Class))
	}
	return upperFirst(classWords(c.Class))
}

// classWords is an effect class in words a person weighs.
func classWords(c lt.EffectClass) string {
	switch c {
	case lt.EffectRead:
		return "it only reads: it changes nothing"
	case lt.EffectIdempotent:
		return "it is safe to repeat: running it again has the same effect"
	default:
		return "it is irreversible: it cannot be undone, and may not be repeated safely"
	}
}

// commandConsequence describes what a shell command can reach.
func (ac *approvalContext) commandConsequence(class lt.EffectClass) string {
	r := ac.r
	files := ac.workspaceFiles()
	// Programs that are not confined to the egress proxy are confined
	// to nothing (plain subprocesses, the local backend).
	// A runner's sandbox is what the runner says it is: the approver is
	// told whose word it is, and on which machine the command runs.
	onRunner := r.envRunner != "" || (r.spec.Environment != nil && r.spec.Environment.Runner != nil)
	where, user, sandbox := "on the server itself", "the server's user", "a sandbox"
	if onRunner {
		where, user, sandbox = "on the machine of a runner", "the runner's user", "a sandbox (as its runner reports)"
		if r.envRunner != "" {
			where = fmt.Sprintf("on the machine of runner %q", r.envRunner)
		}
	}
	if !r.e.runsPrograms() || !r.confinesNetwork() {
		return fmt.Sprintf("Runs a command %s, with no sandbox: it can read and change whatever %s can (files outside the workspace and the network included), not only the session's workspace (%s); %s", where, user, files, classWords(class))
	}
	var hosts []string
	if env := r.spec.Environment; env != nil && env.Network != nil {
		hosts = env.Network.Allow
	}
	if len(hosts) == 0 {
		// Nothing leaves the sandbox: whatever its class, the command can
		// change the workspace only, which checkpoints keep.
		return fmt.Sprintf("Runs a command in %s with no network; it can change only the session's workspace (%s); no secret enters the sandbox", sandbox, files)
	}
	return fmt.Sprintf("Runs a command in %s that can reach only %s; it can change the session's workspace (%s) and send what it reads there to those hosts; no secret enters the sandbox; %s",
		sandbox, strings.Join(hosts, ", "), files, classWords(class))
}

// requestConsequence describes an http_request: where it goes and which
// secrets go with it.
func (ac *approvalContext) requestConsequence(ctx context.Context, c *journal.Call) string {
	r := ac.r
	var args struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	}
	_ = json.Unmarshal(c.Arguments, &args)
	method := strings.ToUpper(cmpOrString(args.Method, "GET"))
	host, dest := "the URL's host", ""
	if u, err := url.Parse(args.URL); err == nil && u.Host != "" {
		host = u.Hostname()
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		dest = net.JoinHostPort(u.Hostname(), port)
	}
	var bound []string
	if env := r.spec.Environment; env != nil && r.e.cfg.Vault != nil && dest != "" {
		for _, name := range env.Secrets {
			if r.e.cfg.Vault.CheckBound(ctx, r.project, name, dest) == nil {
				bound = append(bound, name)
			}
		}
	}
	secrets := "no secret goes with it"
	switch len(bound) {
	case 0:
	case 1:
		secrets = "the secret " + bound[0] + " (bound to that host) goes with it"
	default:
		secrets = "the secrets " + strings.Join(bound, ", ") + " (bound to that host) go with it"
	}
	return fmt.Sprintf("Sends a %s request to %s from the server, outside the sandbox; %s; %s", method, host, secrets, classWords(c.Class))
}

// workspaceFiles says how many files the workspace holds ("12 files").
func (ac *approvalContext) workspaceFiles() string {
	if env := ac.onRunner(); env != nil {
		return ac.runnerFiles(env)
	}
	n, more := 0, false
	err := fs.WalkDir(os.DirFS(ac.r.ws), ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable entry is not counted
		}
		if !d.IsDir() {
			n++
			if n >= maxCountedFiles {
				more = true
				return fs.SkipAll
			}
		}
		return nil
	})
	if err != nil {
		return "its files could not be counted"
	}
	return countedFiles(n, more)
}

// countedFiles says n files ("12 files"); more: at least that many.
func countedFiles(n int, more bool) string {
	switch {
	case more:
		return fmt.Sprintf("%d files or more", n)
	case n == 1:
		return "1 file"
	case n == 0:
		return "empty"
	}
	return fmt.Sprintf("%d files", n)
}

// maxCountedDirs bounds the directories listed, one round trip each, to
// count the files of a workspace on a runner.
const maxCountedDirs = 200

// runnerFiles is workspaceFiles for a workspace on a runner, counted by
// listing it there.
func (ac *approvalContext) runnerFiles(env environment.Environment) string {
	n, more := 0, false
	dirs := []string{"."}
	for listed := 0; len(dirs) > 0 && !more; listed++ {
		if listed == maxCountedDirs {
			more = true
			break
		}
		dir := dirs[0]
		dirs = dirs[1:]
		l, err := env.List(ac.ctx, dir, maxCountedFiles-n)
		if err != nil {
			if dir == "." {
				return "its files could not be counted"
			}
			continue
		}
		for _, en := range l.Entries {
			if en.Type == workspace.EntryDir {
				dirs = append(dirs, path.Join(dir, en.Name))
			} else {
				n++
			}
		}
		if l.Truncated {
			// The entries past the bound are counted as files: "or more".
			n, more = n+l.Total-len(l.Entries), true
		}
		if n >= maxCountedFiles {
			more = true
		}
	}
	return countedFiles(n, more)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return strings.ToUpper(string(r)) + s[n:]
}

func cmpOrString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
