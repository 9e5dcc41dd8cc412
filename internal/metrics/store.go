package metrics

import (
	"context"
	"errors"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Wrap returns st with this node's writes measured: the latency of every
// journal append, the events of every committed append or session
// creation (model calls, tokens, cost, steps, tool calls, retries), the
// leases a claim took over and the webhook attempts recorded. Every other
// method is st's own. Give the result to the engine and the webhook
// dispatcher of this node, and st itself to the scrape (New).
func (m *Metrics) Wrap(st store.Store) store.Store {
	if st == nil {
		panic("metrics: Wrap of a nil store")
	}
	return &instrumented{Store: st, m: m}
}

// instrumented is the decorator Wrap returns. It embeds store.Store, so
// methods added to the interface later pass through unmeasured rather than
// break it.
type instrumented struct {
	store.Store
	m *Metrics
}

// EventAppend appends through the wrapped store, timing it, and counts
// the events once they are committed.
func (s *instrumented) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	start := s.m.cfg.Now()
	evs, err := s.Store.EventAppend(ctx, p)
	s.m.appendLatency.WithLabelValues("append", outcome(err)).Observe(s.m.cfg.Now().Sub(start).Seconds())
	if err == nil {
		s.m.observe(ctx, s.Store, evs, p.Blobs)
	}
	return evs, err
}

// SessionCreate creates through the wrapped store, timing it, and counts
// the session's first events. A fork's first events are a copy of its
// origin's journal up to session.forked: only what follows is counted.
func (s *instrumented) SessionCreate(ctx context.Context, p *store.SessionCreateParams) ([]store.Event, error) {
	start := s.m.cfg.Now()
	evs, err := s.Store.SessionCreate(ctx, p)
	s.m.appendLatency.WithLabelValues("create", outcome(err)).Observe(s.m.cfg.Now().Sub(start).Seconds())
	if err == nil {
		own := evs
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Type == lt.EventSessionForked {
				own = evs[i+1:]
				break
			}
		}
		s.m.observe(ctx, s.Store, own, p.Blobs)
	}
	return evs, err
}

// LeaseClaim claims through the wrapped store and counts the sessions it
// took over from an expired lease.
func (s *instrumented) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]store.Lease, error) {
	leases, err := s.Store.LeaseClaim(ctx, p)
	for _, l := range leases {
		if l.PreviousOwner != "" {
			s.m.takeovers.Inc()
		}
	}
	return leases, err
}

// WebhookRecordAttempt records through the wrapped store and counts the
// attempt by what became of its delivery.
func (s *instrumented) WebhookRecordAttempt(ctx context.Context, p *store.WebhookAttemptParams) error {
	err := s.Store.WebhookRecordAttempt(ctx, p)
	if err == nil {
		s.m.webhooks.WithLabelValues(webhookOutcome(p)).Inc()
	}
	return err
}

// webhookOutcome names what an attempt led to.
func webhookOutcome(p *store.WebhookAttemptParams) string {
	switch {
	case p.Status == store.WebhookDelivered:
		return "delivered"
	case p.Status == store.WebhookDisabled || p.DisableTarget:
		return "disabled"
	case p.Status == store.WebhookPending:
		return "retry"
	default:
		return "failed"
	}
}

// outcome names the result of a journal write.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, store.ErrConflict):
		return "conflict"
	case errors.Is(err, store.ErrLeaseLost):
		return "lease_lost"
	default:
		return "error"
	}
}
