package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/longhaul-dev/longhaul/internal/browser"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The browser built-in (internal/tool's Browser) drives a Chromium that
// runs in the session's sandbox (internal/browser): one per runner, started
// by the first browser call through the session's Environment, like an MCP
// stdio server, and stopped with the environment when the runner parks or
// ends (sessionEnv.close).

// browserTool is the browser built-in's name.
const browserTool = "browser"

// maxStateBytes bounds the state (cookies, page) a browser gets back when
// it starts.
const maxStateBytes = 4 << 20

// remoteBrowser refuses the browser of a session whose environment lives on
// a runner: the runner's side of starting it (and its pipe over the link)
// does not exist yet.
type remoteBrowser struct{}

func (remoteBrowser) Do(context.Context, *tool.BrowserRequest) (*tool.BrowserAnswer, error) {
	return &tool.BrowserAnswer{Error: "the browser cannot run in an environment on a remote runner yet; it runs only in environments on the server's nodes"}, nil
}

// setupBrowser gives env the session's browser driver: nil when the agent
// does not enable the browser tool.
func (r *runner) setupBrowser(env *sessionEnv, opened environment.Environment) {
	if _, ok := r.tools.builtin(browserTool); !ok {
		return
	}
	if opened.Info().Runner != "" {
		env.browser = remoteBrowser{}
		return
	}
	// A profile of its own per session: sub-agents share the workspace,
	// and two browsers cannot share a profile.
	profile := ".browser/" + r.st.Session.ID
	state := profile + "/longhaul-state.json"
	cfg := &browser.Config{
		ProfileDir: profile,
		SaveState: func(ctx context.Context, data []byte) error {
			return opened.WriteFile(ctx, state, data)
		},
		LoadState: func(ctx context.Context) ([]byte, error) {
			res, err := opened.ReadFile(ctx, state, 0, maxStateBytes)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return res.Data, nil
		},
		Login:       r.browserLogin,
		Redactor:    r.e.redactor,
		MemoryBytes: r.e.cfg.BrowserMemory,
	}
	if env.policy != nil && r.confinesNetwork() {
		// The forwarder to the session's egress proxy, inside the sandbox.
		cfg.Proxy = sandbox.ProxyListen
	}
	s := browser.New(func(ctx context.Context, l *browser.Launch) (browser.Process, error) {
		return opened.Start(ctx, &sandbox.StartRequest{Command: l.Command, Env: l.Env, UnboundedAddressSpace: true, MemoryBytes: l.MemoryBytes})
	}, cfg)
	env.browser, env.stopBrowser = s, s.Close
}

// saveArtifact returns what stores a browser screenshot of call c as an
// artifact of the session (not a final one), its id derived from the call
// and its attempt so that a re-run makes a new version rather than a second
// artifact of the same id.
func (r *runner) saveArtifact(c *journal.Call) func(ctx context.Context, name string, data []byte, contentType string) (string, error) {
	return func(_ context.Context, _ string, data []byte, contentType string) (string, error) {
		step, turnID := r.st.Step.N, r.st.Step.TurnID
		name := fmt.Sprintf("browser/screenshot-%s-%d-%d.png", turnID, step, c.Index)
		version := r.st.ArtifactVersions[name] + 1
		a := lt.Artifact{
			ID: derivedID("art_", r.st.Session.ID, name, version), SessionID: r.st.Session.ID, TurnID: turnID,
			Name: name, Version: version, SHA256: r.b.blob(data), Size: int64(len(data)), ContentType: contentType,
			CreatedAt: r.e.clock.Now(),
		}
		if err := r.add(lt.EventArtifactCreated, turnID, step, lt.ArtifactCreatedData{Artifact: a}); err != nil {
			return "", err
		}
		return a.ID, nil
	}
}

// browserPage is the address the session's browser is on, "" when none
// runs in this runner.
func (r *runner) browserPage() string {
	if r.env == nil {
		return ""
	}
	if s, ok := r.env.browser.(*browser.Session); ok {
		return s.Page()
	}
	return ""
}

// browserEvidence shows a person asked to approve a browser call what it
// acts on: the action, the address (the one to open, else the page the
// browser is on, page) and the element.
func browserEvidence(c *journal.Call, page string) []string {
	if c.Tool != browserTool || c.Kind != lt.CallBuiltin {
		return nil
	}
	var a struct {
		Action   string `json:"action"`
		URL      string `json:"url"`
		Selector string `json:"selector"`
		Text     string `json:"text"`
		Key      string `json:"key"`
		Purpose  string `json:"purpose"`
		Secret   string `json:"secret"`
	}
	if json.Unmarshal(c.Arguments, &a) != nil {
		return nil
	}
	line := "Browser action " + a.Action
	switch {
	case a.URL != "":
		line += " at URL " + a.URL
	case page != "":
		line += " on the page at URL " + page
	case a.Action != tool.BrowserClose:
		line += " on the page the browser last showed (its browser is not running now)"
	}
	if a.Selector != "" {
		line += " on the element " + a.Selector
	}
	if a.Action == tool.BrowserType {
		line += fmt.Sprintf(", typing %d characters", len([]rune(a.Text)))
	}
	if a.Key != "" {
		line += ", pressing " + a.Key
	}
	line += loginEvidence(a.Action, a.Secret)
	out := []string{line}
	if a.Purpose != "" {
		out = append(out, "The agent's stated purpose: "+clip(a.Purpose, 500))
	}
	return out
}
