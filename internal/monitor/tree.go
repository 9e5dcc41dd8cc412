package monitor

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The tree-wide detectors. A probe spread over several children, refused
// connections split between siblings, or a secret's fragments sent half by
// one session and half by another show in no single session's journal. So
// each session of a tree adds what its own events count (a contribution:
// a refused connection, a probe, which positions of a secret a call
// carried, never its bytes) to one record of the tree (store
// MonitorTreeGet/MonitorTreePut), replaced conditionally, so sessions
// running at once on different nodes merge one after another. The session
// whose contribution completes a pattern that two sessions or more made
// reports it, with the other sessions' events as its TreeEvidence; a
// pattern one session made alone is its own detector's finding, and that
// session's contributions to it are spent (not counted again by the tree).
//
// A contribution is applied once its event is durable (the engine applies
// TreePending after a flush), so the record never counts an event that a
// crash or a conflict dropped. Applying is idempotent: a session replaying
// its journal after a crash adds its contributions again, and the record
// ignores an event it holds (by seq) or has spent (Spent); a tree finding
// it made is kept (Fired), so the session that made it reports it again
// after a crash before it was journaled, and no other does.

// Kinds of contribution.
const (
	treeRefused        = "refused"
	treeRefusedSpent   = "refused_spent"
	treeProbe          = "probe"
	treeFragment       = "fragment"
	treeFragmentsSpent = "fragment_spent"
)

// Tree-wide thresholds: refused connections as a session's (refusedHosts,
// refusedCount, each session's hits within its own refusedWindow steps);
// probes for secrets made by two sessions or more.
const (
	treeProbes = 3
	// maxFired bounds the tree findings kept for a reporter's replay.
	maxFired = 64
)

// treeContrib is what one event of a session adds to the tree's record.
type treeContrib struct {
	Kind   string `json:"kind"`
	Seq    int64  `json:"seq"`
	TurnID string `json:"turn_id,omitempty"`
	Step   int    `json:"step,omitempty"`
	// MonStep is the session's monitor step (the refused window).
	MonStep int `json:"mon_step,omitempty"`
	// Key is a refused connection's host:port, a fragment's secret name.
	Key string `json:"key,omitempty"`
	// N, Bits: the secret's length and the positions the call carried.
	N    int    `json:"n,omitempty"`
	Bits []byte `json:"bits,omitempty"`
}

// treeState is the tree's record.
type treeState struct {
	// Refused, Probes: by session, its hits not yet spent.
	Refused map[string]window `json:"refused,omitempty"`
	Probes  map[string]window `json:"probes,omitempty"`
	// Coverage: by secret name, by session, the positions its calls
	// carried toward hosts.
	Coverage map[string]map[string]*coverage `json:"coverage,omitempty"`
	// Spent is, by kind, key and session, the newest seq whose
	// contribution is spent: one at or before it is ignored.
	Spent map[string]int64 `json:"spent,omitempty"`
	// Fired are the latest tree findings, with the session and event that
	// completed each.
	Fired []treeFired `json:"fired,omitempty"`
}

type treeFired struct {
	Session string  `json:"session"`
	Seq     int64   `json:"seq"`
	Finding Finding `json:"finding"`
}

// contribute keeps c for the tree's record, when the session is in one.
func (m *Monitor) contribute(c treeContrib) {
	if m.cfg.Tree {
		m.st.TreeOut = append(m.st.TreeOut, c)
	}
}

// TreePending is how many contributions wait to be applied to the tree's
// record, and the newest seq among them.
func (m *Monitor) TreePending() (n int, last int64) {
	if m == nil || len(m.st.TreeOut) == 0 {
		return 0, 0
	}
	return len(m.st.TreeOut), m.st.TreeOut[len(m.st.TreeOut)-1].Seq
}

// TreeApplied forgets the first n contributions: ApplyTree's record was
// stored.
func (m *Monitor) TreeApplied(n int) {
	m.st.TreeOut = append(m.st.TreeOut[:0], m.st.TreeOut[n:]...)
	if len(m.st.TreeOut) == 0 {
		m.st.TreeOut = nil
	}
}

// ApplyTree adds the pending contributions of session to the tree's record
// raw (nil: none yet) and returns the record to store in its place (only
// if it is still the one read), how many contributions it holds, and the
// tree findings they complete.
func (m *Monitor) ApplyTree(raw []byte, session string) ([]byte, int, []Finding, error) {
	var t treeState
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, 0, nil, fmt.Errorf("decode the tree's monitor record: %w", err)
		}
	}
	var out []Finding
	cs := m.st.TreeOut
	for _, c := range cs {
		if f := t.apply(m, session, c); f != nil {
			out = append(out, *f)
		}
	}
	enc, err := json.Marshal(&t)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("encode the tree's monitor record: %w", err)
	}
	return enc, len(cs), out, nil
}

func spentKey(kind, key, session string) string { return kind + "/" + key + "/" + session }

// apply adds c, of session, and returns the tree finding it completes.
func (t *treeState) apply(m *Monitor, session string, c treeContrib) *Finding {
	for i := range t.Fired {
		if f := &t.Fired[i]; f.Session == session && f.Seq == c.Seq {
			// A replay of the contribution that completed it: the same
			// finding (the runner journals it only if it did not yet).
			out := f.Finding
			return &out
		}
	}
	if t.Spent == nil {
		t.Spent = map[string]int64{}
	}
	spend := func(kind, key, session string, seq int64) {
		k := spentKey(kind, key, session)
		t.Spent[k] = max(t.Spent[k], seq)
	}
	switch c.Kind {
	case treeRefusedSpent:
		spend(treeRefused, "", session, c.Seq)
		delete(t.Refused, session)
	case treeFragmentsSpent:
		spend(treeFragment, c.Key, session, c.Seq)
		delete(t.Coverage[c.Key], session)
	case treeRefused, treeProbe:
		if c.Seq <= t.Spent[spentKey(c.Kind, "", session)] {
			return nil
		}
		hits := &t.Refused
		if c.Kind == treeProbe {
			hits = &t.Probes
		}
		if *hits == nil {
			*hits = map[string]window{}
		}
		w := (*hits)[session]
		if slices.ContainsFunc(w, func(h hit) bool { return h.Seq == c.Seq }) {
			return nil
		}
		steps := 1 << 30 // probes: no window
		if c.Kind == treeRefused {
			steps = refusedWindow
		}
		(*hits)[session] = w.add(hit{Seq: c.Seq, Step: c.MonStep, Key: c.Key}, steps)
		f := t.hitsFinding(m, session, c, *hits)
		if f == nil {
			return nil
		}
		for s, w := range *hits {
			spend(c.Kind, "", s, w[len(w)-1].Seq)
		}
		*hits = nil
		return t.fired(session, c.Seq, f)
	case treeFragment:
		if c.Seq <= t.Spent[spentKey(c.Kind, c.Key, session)] {
			return nil
		}
		if t.Coverage == nil {
			t.Coverage = map[string]map[string]*coverage{}
		}
		by := t.Coverage[c.Key]
		if by == nil {
			by = map[string]*coverage{}
			t.Coverage[c.Key] = by
		}
		cov := by[session]
		if cov == nil || cov.N != c.N {
			cov = newCoverage(c.N)
			by[session] = cov
		}
		for i := range min(len(cov.Bits), len(c.Bits)) {
			cov.Bits[i] |= c.Bits[i]
		}
		cov.addCall(c.Seq)
		f := t.fragmentFinding(m, session, c, by)
		if f == nil {
			return nil
		}
		for s, cv := range by {
			spend(c.Kind, c.Key, s, cv.Calls[len(cv.Calls)-1])
		}
		delete(t.Coverage, c.Key)
		return t.fired(session, c.Seq, f)
	}
	return nil
}

// fired keeps f as the finding session's event seq completed.
func (t *treeState) fired(session string, seq int64, f *Finding) *Finding {
	t.Fired = append(t.Fired, treeFired{Session: session, Seq: seq, Finding: *f})
	if len(t.Fired) > maxFired {
		t.Fired = t.Fired[len(t.Fired)-maxFired:]
	}
	return f
}

// treeFinding builds the finding session reports: its own events as the
// evidence, the other sessions' as the tree evidence.
func treeFinding(m *Monitor, session string, c treeContrib, detector, severity, summary string, by map[string][]int64) *Finding {
	if !m.on(detector) {
		return nil
	}
	f := &Finding{
		MonitorFindingData: lt.MonitorFindingData{Detector: detector, Severity: severity, Summary: summary, Evidence: by[session], Action: m.cfg.Actions[detector]},
		TurnID:             c.TurnID, Step: c.Step,
	}
	for _, s := range slices.Sorted(maps.Keys(by)) {
		if s == session {
			continue
		}
		for _, seq := range by[s] {
			f.TreeEvidence = append(f.TreeEvidence, lt.MonitorEvidence{SessionID: s, Seq: seq})
		}
	}
	return f
}

// hitsFinding is the finding of the tree's refused connections or probes,
// when two sessions or more made enough of them.
func (t *treeState) hitsFinding(m *Monitor, session string, c treeContrib, hits map[string]window) *Finding {
	if len(hits) < 2 {
		return nil
	}
	var all window
	by := map[string][]int64{}
	for s, w := range hits {
		all = append(all, w...)
		by[s] = w.seqs()
	}
	if c.Kind == treeProbe {
		if len(all) < treeProbes {
			return nil
		}
		return treeFinding(m, session, c, SecretProbe, High, fmt.Sprintf("%d probes for secrets by %d sessions of the tree", len(all), len(hits)), by)
	}
	dests := all.distinctKeys()
	if dests < refusedHosts && len(all) < refusedCount {
		return nil
	}
	return treeFinding(m, session, c, RefusedConnections, Medium, fmt.Sprintf("%d refused connections to %d destinations by %d sessions of the tree", len(all), dests, len(hits)), by)
}

// fragmentFinding is the finding of a secret whose fragments two sessions
// or more sent toward hosts, half of it or more together.
func (t *treeState) fragmentFinding(m *Monitor, session string, c treeContrib, by map[string]*coverage) *Finding {
	if len(by) < 2 {
		return nil
	}
	union := newCoverage(c.N)
	calls := 0
	seqs := map[string][]int64{}
	for s, cv := range by {
		for i := range min(len(union.Bits), len(cv.Bits)) {
			union.Bits[i] |= cv.Bits[i]
		}
		calls += cv.calls()
		seqs[s] = cv.Calls
	}
	if union.count()*2 < c.N {
		return nil
	}
	return treeFinding(m, session, c, SecretLikeEgress, High,
		fmt.Sprintf("fragments of secret %s (%d%% of it) were sent toward hosts by %d sessions of the tree over %d calls", c.Key, union.percent(), len(by), calls), seqs)
}
