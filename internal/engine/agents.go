package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/policy"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

var agentName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// inlineAgent is the agent name of sessions created with an inline spec.
const inlineAgent = "inline"

// validateSpec checks an agent definition of project (the secrets it names
// must be that project's); errors name the field under prefix (e.g.
// "agent_spec.tools[2].parameters").
func (e *Engine) validateSpec(ctx context.Context, project string, spec *lt.AgentSpec, prefix string) error {
	if err := e.validateModelProvider(spec.Model, prefix+".model"); err != nil {
		return err
	}
	if err := e.validateEnvironment(ctx, project, spec.Environment, prefix+".environment"); err != nil {
		return err
	}
	if err := validateMonitor(spec.Monitor, prefix+".monitor"); err != nil {
		return err
	}
	if err := e.validateModelMonitor(ctx, project, spec.Monitor, prefix+".monitor"); err != nil {
		return err
	}
	if err := e.validateModelAccess(ctx, project, spec.Model, prefix+".model"); err != nil {
		return err
	}
	if c := spec.Compaction; c != nil && (c.Threshold < 0 || c.Threshold >= 1) {
		return apierror.Invalid(prefix+".compaction.threshold", "must be between 0 and 1 (a share of the context window; 0: the default 0.7)")
	}
	if v := spec.VerifyAcceptance; v != nil && (v.MaxAttempts < 0 || v.MaxAttempts > 10) {
		return apierror.Invalid(prefix+".verify_acceptance.max_attempts", "must be between 0 and 10")
	}
	if spec.MaxSteps < 0 {
		return apierror.Invalid(prefix+".max_steps", "must be >= 0")
	}
	seen := map[string]bool{}
	for i, t := range spec.Tools {
		f := fmt.Sprintf("%s.tools[%d]", prefix, i)
		if t.Name == "" {
			return apierror.Invalid(f+".name", "required")
		}
		if seen[t.Name] {
			return apierror.Invalid(f+".name", "duplicate tool %q", t.Name)
		}
		seen[t.Name] = true
		if t.Effect != "" && !t.Effect.Valid() {
			return apierror.Invalid(f+".effect", "must be read, idempotent or irreversible")
		}
		// What the entry stands for, as a runner's catalog resolves it.
		resolved, known := toolFromSpec(e.tools, &t)
		if t.Effect != "" && known && resolved.ns == nsEngine {
			return apierror.Invalid(f+".effect", "%s is run by the engine and has no external effect to classify", t.Name)
		}
		if t.TimeoutSeconds < 0 || t.TimeoutSeconds > 3600 {
			return apierror.Invalid(f+".timeout_seconds", "must be between 0 and 3600")
		}
		if t.Type != "mcp" {
			if field := mcpOnlyField(&t); field != "" {
				return apierror.Invalid(f+"."+field, "applies only to MCP servers (\"type\": \"mcp\")")
			}
		}
		switch t.Type {
		case "", "builtin":
			if !known {
				return apierror.Invalid(f+".name", "unknown built-in tool %q (application tools need \"type\": \"function\")", t.Name)
			}
			if len(t.Parameters) > 0 {
				return apierror.Invalid(f+".parameters", "built-in tools have fixed parameters")
			}
		case "function":
			if !toolName.MatchString(t.Name) {
				return apierror.Invalid(f+".name", "must match %s", toolName)
			}
			if len(t.Parameters) > 0 {
				if err := tool.CompileSchema(t.Parameters); err != nil {
					return apierror.Invalid(f+".parameters", "invalid JSON schema: %v", err)
				}
			}
		case "mcp":
			if err := e.validateMCP(ctx, project, &t, f); err != nil {
				return err
			}
		default:
			return apierror.Invalid(f+".type", "unknown tool type %q (want function or mcp)", t.Type)
		}
	}
	if err := mcpNameClash(spec.Tools, prefix); err != nil {
		return err
	}
	if spec.Budget != nil {
		if err := validateBudget(*spec.Budget, prefix+".budget"); err != nil {
			return err
		}
	}
	if _, err := compilePolicies(spec); err != nil {
		var fe *policy.FieldError
		if errors.As(err, &fe) {
			return apierror.Invalid(prefix+"."+fe.Field, "%s", fe.Message)
		}
		return apierror.Invalid(prefix+".policies", "%v", err)
	}
	for i, p := range spec.Policies {
		if _, isEngine := engineToolNamed(p.Tool); isEngine {
			// Refused rather than ignored: a rule that never applies would
			// look like protection.
			return apierror.Invalid(fmt.Sprintf("%s.policies[%d].tool", prefix, i), "%s is run by the engine and touches nothing outside the session: policies do not apply to it", p.Tool)
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max_consecutive_tool_errors", int64(spec.MaxConsecutiveToolErrors)},
		{"max_repeated_calls", int64(spec.MaxRepeatedCalls)},
		{"turn_timeout_seconds", spec.TurnTimeoutSeconds},
	} {
		if f.v < 0 {
			return apierror.Invalid(prefix+"."+f.name, "must be >= 0")
		}
	}
	if l := spec.Subagents; l != nil {
		switch {
		case l.MaxParallel < 0 || l.MaxParallel > 100:
			return apierror.Invalid(prefix+".subagents.max_parallel", "must be between 0 and 100 (0: the default 6)")
		case l.MaxDepth < 0 || l.MaxDepth > 10:
			return apierror.Invalid(prefix+".subagents.max_depth", "must be between 0 and 10 (0: the default 3)")
		}
	}
	if r := spec.Retry; r != nil {
		switch {
		case r.MaxAttempts < 0 || r.MaxAttempts > 100:
			return apierror.Invalid(prefix+".retry.max_attempts", "must be between 0 and 100")
		case r.InitialBackoffMS < 0:
			return apierror.Invalid(prefix+".retry.initial_backoff_ms", "must be >= 0")
		case r.MaxBackoffMS < 0:
			return apierror.Invalid(prefix+".retry.max_backoff_ms", "must be >= 0")
		case r.MaxBackoffMS > 0 && r.InitialBackoffMS > r.MaxBackoffMS:
			return apierror.Invalid(prefix+".retry.initial_backoff_ms", "must not exceed max_backoff_ms")
		}
	}
	return nil
}

var toolName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

func validateBudget(b lt.Budget, prefix string) error {
	pairs := []struct {
		name      string
		max, soft float64
	}{
		{"cost_usd", b.MaxCostUSD, b.SoftCostUSD},
		{"tokens", float64(b.MaxTokens), float64(b.SoftTokens)},
		{"model_calls", float64(b.MaxModelCalls), float64(b.SoftModelCalls)},
		{"tool_calls", float64(b.MaxToolCalls), float64(b.SoftToolCalls)},
		{"wall_seconds", float64(b.MaxWallSeconds), float64(b.SoftWallSeconds)},
	}
	field := func(name string) string {
		if prefix == "" {
			return name
		}
		return prefix + "." + name
	}
	for _, p := range pairs {
		if p.max < 0 {
			return apierror.Invalid(field("max_"+p.name), "must be >= 0")
		}
		if p.soft < 0 {
			return apierror.Invalid(field("soft_"+p.name), "must be >= 0")
		}
		if p.max > 0 && p.soft > p.max {
			return apierror.Invalid(field("soft_"+p.name), "must not exceed max_%s", p.name)
		}
	}
	return nil
}

// PutAgent creates an agent of req.Project ("": the default project) or
// adds a version of it.
func (e *Engine) PutAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, error) {
	project := cmp.Or(req.Project, lt.DefaultProject)
	if !agentName.MatchString(req.Name) {
		return nil, apierror.Invalid("name", "must match %s", agentName)
	}
	if req.Name == inlineAgent {
		return nil, apierror.Invalid("name", "%q is reserved for sessions created with an inline agent_spec", inlineAgent)
	}
	// A version carries no id of its own to name after a keyed request's
	// seed: its creator's record carries the seed instead, and a run of
	// the same request (its first run's answer lost, or two at once) is
	// answered with the version that carries it, before the definition
	// is checked again (what was allowed then may be refused now).
	seed, _, err := CreationSeed(ctx)
	if err != nil {
		return nil, err
	}
	if seed != "" && IsRerun(ctx) {
		if v, err := e.agentMadeBy(ctx, project, req.Name, seed); v != nil || err != nil {
			return v, err
		}
	}
	if err := e.validateSpec(ctx, project, &req.Spec, "spec"); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(req.Spec)
	if err != nil {
		return nil, err
	}
	var by json.RawMessage // who defines the version; nil: unknown
	if a := actorOf(ctx); a != nil {
		if by, err = json.Marshal(agentCreator{Actor: *a, Request: seed}); err != nil {
			return nil, err
		}
	}
	for {
		version := 1
		latest, err := e.store.AgentGet(ctx, project, req.Name, 0)
		switch {
		case err == nil:
			if seed != "" && createdBy(latest) == seed {
				return agentView(latest) // made by a run of the request at the same time
			}
			version = latest.Version + 1
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		row, err := e.store.AgentInsert(ctx, &store.AgentInsertParams{Project: project, Name: req.Name, Version: version, Spec: raw, CreatedAt: e.clock.Now(), CreatedBy: by})
		if errors.Is(err, store.ErrConflict) {
			continue // another writer took this version: take the next
		}
		if err != nil {
			return nil, err
		}
		return agentView(row)
	}
}

// agentCreator is what a version records of who made it: the actor, and
// the seed of the keyed request that did (read back as an lt.Actor, which
// leaves the seed out).
type agentCreator struct {
	lt.Actor
	Request string `json:"request,omitempty"`
}

// createdBy is the seed of the request that made version r ("" if none).
func createdBy(r *store.AgentRow) string {
	var c agentCreator
	if len(r.CreatedBy) == 0 || json.Unmarshal(r.CreatedBy, &c) != nil {
		return ""
	}
	return c.Request
}

// agentMadeBy is the version of agent name that a run of the request of
// seed made, or nil.
func (e *Engine) agentMadeBy(ctx context.Context, project, name, seed string) (*lt.Agent, error) {
	rows, err := e.store.AgentVersions(ctx, project, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if createdBy(r) == seed {
			return agentView(r)
		}
	}
	return nil, nil
}

// ListAgents returns the latest version of every agent of project ("": of
// every project).
func (e *Engine) ListAgents(ctx context.Context, project string) ([]lt.Agent, error) {
	rows, err := e.store.AgentList(ctx, project)
	if err != nil {
		return nil, err
	}
	return agentViews(rows)
}

// GetAgent returns one version of the agent name of project ("": the
// default project; version 0: the latest). An agent of another project is
// not found.
func (e *Engine) GetAgent(ctx context.Context, project, name string, version int) (*lt.Agent, error) {
	project = cmp.Or(project, lt.DefaultProject)
	row, err := e.store.AgentGet(ctx, project, name, version)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierror.NotFound("agent %q not found in project %s", name, project)
	}
	if err != nil {
		return nil, err
	}
	return agentView(row)
}

// ListAgentVersions returns every version of an agent of project, newest
// first, in one read.
func (e *Engine) ListAgentVersions(ctx context.Context, project, name string) ([]lt.Agent, error) {
	project = cmp.Or(project, lt.DefaultProject)
	rows, err := e.store.AgentVersions(ctx, project, name)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, apierror.NotFound("agent %q not found in project %s", name, project)
	}
	return agentViews(rows)
}

// agentViews is agentView of each row, in order.
func agentViews(rows []*store.AgentRow) ([]lt.Agent, error) {
	out := make([]lt.Agent, 0, len(rows))
	for _, r := range rows {
		a, err := agentView(r)
		if err != nil {
			return nil, err
		}
		out = append(out, *a)
	}
	return out, nil
}

func agentView(r *store.AgentRow) (*lt.Agent, error) {
	a := &lt.Agent{Project: r.Project, Name: r.Name, Version: r.Version, CreatedAt: r.CreatedAt}
	if err := json.Unmarshal(r.Spec, &a.Spec); err != nil {
		return nil, fmt.Errorf("decode agent %s v%d: %w", r.Name, r.Version, err)
	}
	if len(r.CreatedBy) > 0 {
		if err := json.Unmarshal(r.CreatedBy, &a.CreatedBy); err != nil {
			return nil, fmt.Errorf("decode the creator of agent %s v%d: %w", r.Name, r.Version, err)
		}
	}
	return a, nil
}

// validateModelProvider checks that a model spec (an agent's, or its model
// monitor's) names a provider this server has, and that the provider
// accepts it; errors name the field under prefix ("agent_spec.model").
func (e *Engine) validateModelProvider(m lt.ModelSpec, prefix string) error {
	p, ok := e.cfg.Providers[m.Provider]
	switch {
	case m.Provider == "":
		return apierror.Invalid(prefix+".provider", "required")
	case !ok:
		return apierror.Invalid(prefix+".provider", "unknown provider %q", m.Provider)
	}
	if v, ok := p.(model.SpecValidator); ok {
		if err := v.ValidateSpec(m); err != nil {
			var fe *model.FieldError
			if errors.As(err, &fe) {
				return apierror.Invalid(prefix+"."+fe.Field, "%s", fe.Message)
			}
			return apierror.Invalid(prefix, "%s", err.Error())
		}
	}
	return nil
}
