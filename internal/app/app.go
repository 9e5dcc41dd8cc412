package app

import (
	"errors"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/report"
	"github.com/longhaul-dev/longhaul/internal/vault"
	"github.com/longhaul-dev/longhaul/internal/webhook"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Limits of lists, as API.md "Conventions" gives them.
const (
	// DefaultListLimit is a page's size when the caller gives none.
	DefaultListLimit = 50
	// MaxListLimit is the largest page served.
	MaxListLimit = 500
)

// App implements Service over one node's engine, vault, webhook
// dispatcher and reports.
type App struct {
	eng      *engine.Engine
	vault    *vault.API
	webhooks *webhook.API
	reports  *report.Service
}

var _ Service = (*App)(nil)

// Deps are what an App serves. Every field is required.
type Deps struct {
	Engine   *engine.Engine
	Vault    *vault.API
	Webhooks *webhook.API
	Reports  *report.Service
}

// New returns the App serving d. It fails naming the first missing
// dependency (a wiring mistake).
func New(d Deps) (*App, error) {
	switch {
	case d.Engine == nil:
		return nil, errors.New("app: Deps.Engine is nil")
	case d.Vault == nil:
		return nil, errors.New("app: Deps.Vault is nil")
	case d.Webhooks == nil:
		return nil, errors.New("app: Deps.Webhooks is nil")
	case d.Reports == nil:
		return nil, errors.New("app: Deps.Reports is nil")
	}
	return &App{eng: d.Engine, vault: d.Vault, webhooks: d.Webhooks, reports: d.Reports}, nil
}

// list wraps a slice as a one-page list (never a null data).
func list[T any](data []T) *lt.List[T] {
	if data == nil {
		data = []T{}
	}
	return &lt.List[T]{Data: data}
}
