package metrics

import (
	"context"
	"log/slog"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

var (
	sessionsDesc = prometheus.NewDesc("longhaul_sessions",
		"Sessions by status, in the whole deployment (read from the store at scrape time; every node reports the same).",
		[]string{"status"}, nil)
	pendingDesc = prometheus.NewDesc("longhaul_required_actions_pending",
		"Required actions waiting for a decision, by type, in the whole deployment (read at scrape time).",
		[]string{"type"}, nil)
	oldestDesc = prometheus.NewDesc("longhaul_required_action_oldest_age_seconds",
		"Age of the oldest pending required action of each type (0 when none is pending), in the whole deployment.",
		[]string{"type"}, nil)
)

// Every known status and action type is reported, 0 included, so a
// series does not vanish when its count drops to zero.
var (
	knownStatuses = []lt.SessionStatus{
		lt.SessionQueued, lt.SessionRunning, lt.SessionRequiresAction, lt.SessionWaiting,
		lt.SessionIdle, lt.SessionFailed, lt.SessionCancelled, lt.SessionPaused,
	}
	knownActionTypes = []lt.ActionType{lt.ActionApproval, lt.ActionFunctionCall, lt.ActionInput, lt.ActionInDoubt, lt.ActionBudget, lt.ActionEnvironmentConnection, lt.ActionBrowserPermission, lt.ActionMonitor}
)

// stateCollector reads the deployment's state gauges from the store at
// each scrape: two grouped queries over small indexes.
type stateCollector struct {
	st  store.Store
	cfg *Config
	log *slog.Logger
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sessionsDesc
	ch <- pendingDesc
	ch <- oldestDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ScrapeTimeout)
	defer cancel()

	counts, err := c.st.SessionCountByStatus(ctx)
	if err != nil {
		c.log.Warn("metrics: count sessions", "err", err)
		ch <- prometheus.NewInvalidMetric(sessionsDesc, err)
	} else {
		statuses := make([]string, 0, len(knownStatuses)+len(counts))
		for _, s := range knownStatuses {
			statuses = append(statuses, string(s))
		}
		for s := range counts {
			if !slices.Contains(statuses, s) {
				statuses = append(statuses, s) // a status this binary does not know yet
			}
		}
		for _, s := range statuses {
			ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(counts[s]), s)
		}
	}

	stats, err := c.st.ActionPendingStats(ctx)
	if err != nil {
		c.log.Warn("metrics: count pending actions", "err", err)
		ch <- prometheus.NewInvalidMetric(pendingDesc, err)
		return
	}
	now := c.cfg.Now()
	byType := make(map[string]store.ActionTypeStats, len(stats))
	types := make([]string, 0, len(knownActionTypes)+len(stats))
	for _, t := range knownActionTypes {
		types = append(types, string(t))
	}
	for _, s := range stats {
		if s.Type == "" {
			s.Type = "unknown" // an action document without a type
		}
		byType[s.Type] = s
		if !slices.Contains(types, s.Type) {
			types = append(types, s.Type)
		}
	}
	for _, t := range types {
		s, ok := byType[t]
		age := 0.0
		if ok && s.Count > 0 {
			age = max(0, now.Sub(s.OldestCreatedAt).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(s.Count), t)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age, t)
	}
}
