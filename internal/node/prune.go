package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/longhaul-dev/longhaul/internal/server"
)

// DefaultIdempotencyRetention is how long the response to a request with
// an Idempotency-Key answers its repeats unless
// Config.IdempotencyRetention says otherwise.
const DefaultIdempotencyRetention = server.DefaultIdempotencyRetention

// MinIdempotencyRetention is the shortest Config.IdempotencyRetention
// Open accepts.
const MinIdempotencyRetention = server.MinIdempotencyRetention

// PruneInterval is how often a node deletes what outlived its retention:
// the audit entries (Config.AuditRetention) and the idempotency records
// (Config.IdempotencyRetention), each once when it starts and then at
// every interval. Every node prunes: a prune deletes by age, so nodes that
// prune at once delete each row once and none fails for another's.
const PruneInterval = time.Hour

// pruner runs prune at start and then on every tick, until stop.
type pruner struct {
	// what names what it prunes in its logs ("the audit log").
	what  string
	prune func(ctx context.Context) (int64, error)
	log   *slog.Logger
	// ticks and stopTicks come from a ticker of PruneInterval; tests send
	// ticks on demand.
	ticks     <-chan time.Time
	stopTicks func()

	cancel context.CancelFunc
	done   chan struct{}
}

func newPruner(what string, prune func(ctx context.Context) (int64, error), log *slog.Logger, ticks <-chan time.Time, stopTicks func()) *pruner {
	return &pruner{what: what, prune: prune, log: log, ticks: ticks, stopTicks: stopTicks}
}

// startPruner starts a pruner of what on a ticker of PruneInterval.
func startPruner(ctx context.Context, what string, prune func(ctx context.Context) (int64, error), log *slog.Logger) *pruner {
	tick := time.NewTicker(PruneInterval)
	p := newPruner(what, prune, log, tick.C, tick.Stop)
	p.start(ctx)
	return p
}

// start runs the pruner in a goroutine that ends with stop.
func (p *pruner) start(ctx context.Context) {
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
func (p *pruner) pruneOnce(ctx context.Context) {
	n, err := p.prune(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		p.log.Error("prune "+p.what, "deleted", n, "err", err)
	case n > 0:
		p.log.Info("pruned "+p.what, "deleted", n)
	}
}

// stop ends the pruner and waits for its goroutine; safe on nil.
func (p *pruner) stop() {
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
	p.stopTicks()
}
