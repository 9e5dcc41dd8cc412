package webhook

import (
	"net/http"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// What api_test.go (package webhook_test) uses of this package's test
// harness. That test serves the API through internal/server, which imports
// internal/app, which imports this package: an internal test cannot.

// T0 is the fake clock's start.
var T0 = t0

// Env is the harness's store and fake clock.
type Env struct{ e *env }

func NewEnv(t *testing.T) *Env                              { return &Env{e: newEnv(t)} }
func (x *Env) Store() store.Store                           { return x.e.st }
func (x *Env) Advance(d time.Duration)                      { x.e.clock.Advance(d) }
func (x *Env) CreateSession(id, webhookURL string)          { x.e.createSession(id, webhookURL) }
func (x *Env) Status(id string, to lt.SessionStatus)        { x.e.status(id, to) }
func (x *Env) Deliveries() []*store.WebhookDeliveryRow      { return x.e.deliveries() }
func (x *Env) Config() *Config                              { return &Config{Clock: x.e.clock} }
func (x *Env) Start(cfg Config) (*Dispatcher, func())       { return x.e.start(cfg) }
func Eventually(t *testing.T, cond func() bool, msg string) { eventually(t, cond, msg) }

// NewReceiver starts a receiver and returns its URL and the dispatcher
// configuration that may reach it.
func NewReceiver(t *testing.T, respond func(n int, w http.ResponseWriter)) (string, Config) {
	r := newReceiver(t, respond)
	return r.srv.URL, allowFor(t, r)
}
