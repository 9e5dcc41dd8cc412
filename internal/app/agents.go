package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// PutAgent implements Service.
func (a *App) PutAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, error) {
	return a.eng.PutAgent(ctx, req)
}

// EnsureAgent implements Service: what a program that starts again and
// again wants, a version added only when the spec changed (compared as
// canonical JSON, so key order and spacing do not count).
func (a *App) EnsureAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, bool, error) {
	if req == nil {
		return nil, false, apierror.Invalid("", "the agent definition is missing")
	}
	latest, err := a.eng.GetAgent(ctx, req.Name, 0)
	var ae *apierror.Error
	switch {
	case err == nil:
		same, err := SameSpec(&latest.Spec, &req.Spec)
		if err != nil {
			return nil, false, err
		}
		if same {
			return latest, false, nil
		}
	case !errors.As(err, &ae) || ae.Status != http.StatusNotFound:
		return nil, false, err
	}
	agent, err := a.eng.PutAgent(ctx, req)
	if err != nil {
		return nil, false, err
	}
	return agent, true, nil
}

// SameSpec reports whether two agent specs are the same definition: equal
// as canonical JSON.
func SameSpec(a, b *lt.AgentSpec) (bool, error) {
	canon := func(s *lt.AgentSpec) ([]byte, error) {
		raw, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("encode agent spec: %w", err)
		}
		return tool.CanonicalJSON(raw)
	}
	ca, err := canon(a)
	if err != nil {
		return false, err
	}
	cb, err := canon(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}

// ListAgents implements Service.
func (a *App) ListAgents(ctx context.Context) (*lt.List[lt.Agent], error) {
	agents, err := a.eng.ListAgents(ctx)
	if err != nil {
		return nil, err
	}
	return list(agents), nil
}

// GetAgent implements Service.
func (a *App) GetAgent(ctx context.Context, name string, version int) (*lt.Agent, error) {
	return a.eng.GetAgent(ctx, name, version)
}
