package report

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Config tunes a Service. A nil *Config means defaults.
type Config struct {
	// Now is the clock that windows given as durations, and the duration
	// of tasks still at work, are measured from. Default time.Now.
	Now func() time.Time
	// MaxTasks bounds the sessions one report reads; a window holding
	// more is refused (400 naming since) rather than read for seconds.
	// Default 50,000.
	MaxTasks int
	// RelaxAfterAsks is how many asks, every one approved, flag a policy
	// rule as a candidate to relax. Default lt.DefaultRelaxAfterAsks (20).
	RelaxAfterAsks int
	// ToTighten names more rules to tighten, besides those the sessions'
	// journals link to a monitor finding (journal.Tally.Tighten): it
	// returns, for the report's window, the rules and why (its reason
	// wins). Default nil: only the journals' rules.
	ToTighten TightenSource
}

// TightenSource names policy rules to tighten in a report's window
// (rule → reason), for PolicyApprovals.Tighten; an error fails the report.
type TightenSource func(ctx context.Context, r *lt.TaskReport) (map[string]string, error)

// DefaultMaxTasks is Config.MaxTasks' default.
const DefaultMaxTasks = 50_000

// scanPage is how many session rows one store read takes.
const scanPage = 1000

// Service computes task reports from a store's projections; the
// application service (internal/app) serves them. All methods are safe for
// concurrent use.
type Service struct {
	st  store.Store
	cfg Config
}

// New returns a Service reading st. It panics on a nil store or an invalid
// cfg (wiring mistakes).
func New(st store.Store, cfg *Config) *Service {
	if st == nil {
		panic("report: nil store")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.MaxTasks < 0 {
		panic("report config: MaxTasks is negative")
	}
	if c.RelaxAfterAsks < 0 {
		panic("report config: RelaxAfterAsks is negative")
	}
	if c.RelaxAfterAsks == 0 {
		c.RelaxAfterAsks = lt.DefaultRelaxAfterAsks
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxTasks == 0 {
		c.MaxTasks = DefaultMaxTasks
	}
	return &Service{st: st, cfg: c}
}

// TaskReport reports the tasks created in the window p selects: the page
// of records p.Cursor and p.Limit ask for (newest first), and the totals
// and series of the whole window. Invalid parameters are 400s naming the
// parameter.
func (s *Service) TaskReport(ctx context.Context, p lt.TaskReportParams) (*lt.TaskReport, error) {
	now := s.cfg.Now().UTC()
	w, err := newWindow(p, now)
	if err != nil {
		return nil, err
	}
	rep := &lt.TaskReport{
		Since: w.since, Until: w.until, Agent: w.agent, Project: w.project, IncludeSubagents: w.includeSubagents, Bucket: w.bucket,
		RelaxAfterAsks: s.cfg.RelaxAfterAsks,
		Series:         make([]lt.TaskBucket, w.buckets),
		Data:           []lt.TaskRecord{},
		Totals:         lt.TaskTotals{ByStatus: map[lt.SessionStatus]int{}},
	}
	for i := range rep.Series {
		rep.Series[i].Start = w.seriesStart.Add(time.Duration(i) * w.step)
	}

	list := store.SessionListParams{
		Project: w.project, Agent: w.agent, RootsOnly: !w.includeSubagents,
		CreatedFrom: w.since, CreatedBefore: w.until, Limit: scanPage,
	}
	// The page starts after the cursor's task (at once without one); the
	// scan goes on to the end of the window for the totals.
	paging := w.cursor == ""
	read := 0
	byActor := map[lt.Actor]int{}
	rules := ruleFigures{}
	// tighten: the rules the monitor flagged in the window's sessions, the
	// newest session's reason first.
	tighten := map[string]string{}
	for {
		rows, err := s.st.SessionList(ctx, &list)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil, err
			}
			return nil, fmt.Errorf("report tasks: %w", err)
		}
		for _, row := range rows {
			if read++; read > s.cfg.MaxTasks {
				return nil, apierror.Invalid("since", "the window holds more than %d tasks: shorten it (since, until) or choose an agent", s.cfg.MaxTasks)
			}
			t, err := newTask(row, now)
			if err != nil {
				return nil, fmt.Errorf("report tasks: %w", err)
			}
			add(rep, w, t)
			for _, c := range t.rec.DecisionsByActor {
				byActor[c.Actor] += c.Count
			}
			rules.add(t.approvals)
			for rule, reason := range t.tighten {
				if _, ok := tighten[rule]; !ok {
					tighten[rule] = reason
				}
			}
			switch {
			case !paging:
				paging = row.ID == w.cursor
			case len(rep.Data) < w.limit:
				rep.Data = append(rep.Data, t.rec)
			case rep.NextCursor == nil:
				next := rep.Data[len(rep.Data)-1].ID
				rep.NextCursor = &next
			}
		}
		if len(rows) < scanPage {
			break
		}
		list.Cursor = rows[len(rows)-1].ID
	}
	if !paging {
		return nil, apierror.Invalid("cursor", "%q is not a task of this report's window: page with the since and until of the first page", w.cursor)
	}
	finish(&rep.Totals)
	rep.Totals.DecisionsByActor = make([]lt.ActorCount, 0, len(byActor))
	for a, n := range byActor {
		rep.Totals.DecisionsByActor = append(rep.Totals.DecisionsByActor, lt.ActorCount{Actor: a, Count: n})
	}
	sortActorCounts(rep.Totals.DecisionsByActor)
	rep.Totals.Policies = rules.figures(s.cfg.RelaxAfterAsks)
	if s.cfg.ToTighten != nil {
		flagged, err := s.cfg.ToTighten(ctx, rep)
		if err != nil {
			return nil, fmt.Errorf("report tasks: rules to tighten: %w", err)
		}
		for rule, reason := range flagged {
			tighten[rule] = reason
		}
	}
	flagTighten(&rep.Totals, tighten)
	return rep, nil
}

// add counts one task in the totals and its bucket of the series. With
// sub-agents as tasks of their own, each session's own cost is counted,
// so a parent's rolled-up sub-agent cost is not counted twice.
func add(rep *lt.TaskReport, w *window, t *task) {
	r := &t.rec
	tot := &rep.Totals
	b := &rep.Series[w.bucketOf(r.CreatedAt)]
	usage := r.Usage
	if w.includeSubagents {
		usage = t.own
	}
	tot.Tasks++
	b.Tasks++
	tot.ByStatus[r.Status]++
	if r.Review != nil {
		tot.Reviewed++
		b.Reviewed++
		if r.Review.Accepted {
			tot.Accepted++
			b.Accepted++
		} else {
			tot.Rejected++
		}
	}
	if r.InputComplete {
		tot.InputComplete++
	}
	tot.Asks += r.Asks
	tot.Retries += r.Retries
	tot.Usage.Add(usage)
	tot.CostUSD += usage.CostUSD
	tot.MonitorCostUSD += usage.MonitorCostUSD
	b.CostUSD += usage.CostUSD
}

// finish derives the ratios from the sums.
func finish(t *lt.TaskTotals) {
	ratio := func(a float64, b int) *float64 {
		if b == 0 {
			return nil
		}
		v := a / float64(b)
		return &v
	}
	t.AcceptanceRate = ratio(float64(t.Accepted), t.Reviewed)
	t.AsksPerTask = ratio(float64(t.Asks), t.Tasks)
	t.CostPerAcceptedTaskUSD = ratio(t.CostUSD, t.Accepted)
}
