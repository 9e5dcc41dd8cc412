package app

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/report"
	"github.com/longhaul-dev/longhaul/internal/store"
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
	// store holds the API keys and the runners' connections.
	store store.Store
	clock func() time.Time
	log   *slog.Logger
	// trees serves the sub-agent trees and the followed journals.
	trees *Trees
	// runnerStaleAfter: a runner not seen for longer is not listed.
	runnerStaleAfter time.Duration
}

var _ Service = (*App)(nil)

// Deps are what an App serves. Every field is required but PollInterval,
// Now and Logger.
type Deps struct {
	Engine   *engine.Engine
	Vault    *vault.API
	Webhooks *webhook.API
	Reports  *report.Service
	// Store holds the API keys (the engine's store).
	Store store.Store
	// Now is the clock of the keys' times. Default time.Now.
	Now func() time.Time
	// Logger receives what fails beside a request (recording a key's
	// use). Default: slog.Default().
	Logger *slog.Logger
	// PollInterval is how often a followed journal (StreamEvents,
	// StreamTreeEvents) is read again when no notice of its growth came.
	// Default DefaultPollInterval.
	PollInterval time.Duration
	// RunnerStaleAfter is how long a runner's row stays listed without a
	// sign of life (a node that died without removing it): internal/node
	// gives hub.StaleAfter of the hub's touch interval. Default
	// DefaultRunnerStaleAfter.
	RunnerStaleAfter time.Duration
}

// DefaultRunnerStaleAfter is Deps.RunnerStaleAfter's default: three of the
// hub's default touch intervals.
const DefaultRunnerStaleAfter = 15 * time.Second

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
	case d.Store == nil:
		return nil, errors.New("app: Deps.Store is nil")
	case d.PollInterval < 0:
		return nil, fmt.Errorf("app: Deps.PollInterval is negative (%s)", d.PollInterval)
	case d.RunnerStaleAfter < 0:
		return nil, fmt.Errorf("app: Deps.RunnerStaleAfter is negative (%s)", d.RunnerStaleAfter)
	}
	stale := d.RunnerStaleAfter
	if stale == 0 {
		stale = DefaultRunnerStaleAfter
	}
	var poll func() (<-chan time.Time, func())
	if d.PollInterval > 0 {
		poll = every(d.PollInterval)
	}
	now := d.Now
	if now == nil {
		now = time.Now
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	return &App{eng: d.Engine, vault: d.Vault, webhooks: d.Webhooks, reports: d.Reports, store: d.Store, clock: now,
		log: log, trees: NewTrees(d.Engine, poll), runnerStaleAfter: stale}, nil
}

// now is the App's clock, in UTC at the stores' precision (microseconds).
func (a *App) now() time.Time { return a.clock().UTC().Truncate(time.Microsecond) }

// list wraps a slice as a one-page list (never a null data).
func list[T any](data []T) *lt.List[T] {
	if data == nil {
		data = []T{}
	}
	return &lt.List[T]{Data: data}
}
