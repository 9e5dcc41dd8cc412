package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/server"
)

// DefaultAuditRetention is how long the audit log keeps an entry unless
// Config.AuditRetention says otherwise.
const DefaultAuditRetention = app.DefaultAuditRetention

// AuditPruneInterval is how often a node deletes the audit entries older
// than its retention (and once when it starts). Every node prunes: a prune
// is one DELETE by age, so nodes that prune at once delete each entry once
// and none fails for another's.
const AuditPruneInterval = time.Hour

// ValidRateLimit checks a --rate-limit spec (server.ParseRateLimits), so
// that the serve command refuses a bad one before it opens anything.
func ValidRateLimit(spec string) error {
	_, err := server.ParseRateLimits(spec)
	return err
}

// auditPruner runs prune at start and then on every tick, until stop.
type auditPruner struct {
	prune func(ctx context.Context) (int64, error)
	log   *slog.Logger
	// ticks and stopTicks come from a ticker of AuditPruneInterval; tests
	// send ticks on demand.
	ticks     <-chan time.Time
	stopTicks func()

	cancel context.CancelFunc
	done   chan struct{}
}

func newAuditPruner(prune func(ctx context.Context) (int64, error), log *slog.Logger, ticks <-chan time.Time, stopTicks func()) *auditPruner {
	return &auditPruner{prune: prune, log: log, ticks: ticks, stopTicks: stopTicks}
}

// start runs the pruner in a goroutine that ends with stop.
func (p *auditPruner) start(ctx context.Context) {
	ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		for {
			p.pruneOnce(ctx)
			select {
			case <-ctx.Done():
				return
			case <-p.ticks:
			}
		}
	}()
}

// pruneOnce prunes and logs what it did; a failure is logged, and the
// next tick tries again.
func (p *auditPruner) pruneOnce(ctx context.Context) {
	n, err := p.prune(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		p.log.Error("prune the audit log", "err", err)
	case n > 0:
		p.log.Info("pruned the audit log", "deleted", n)
	}
}

// stop ends the pruner and waits for its goroutine.
func (p *auditPruner) stop() {
	p.cancel()
	<-p.done
	p.stopTicks()
}
