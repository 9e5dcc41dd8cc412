package monitor

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Thresholds. A window counts monitor steps: the distinct (turn, step)
// pairs of the session's tool calls.
const (
	refusedWindow     = 10 // steps
	refusedHosts      = 3  // distinct refused hosts in the window
	refusedCount      = 5  // refused connections in the window
	permissionWindow  = 10 // steps
	permissionBurst   = 5  // permission errors in the window
	failureThreshold  = 3  // identical failing calls
	maxTrackedCalls   = 256
	maxTrackedActions = 512
)

// SpawnTool is the engine's tool that starts a sub-agent.
const SpawnTool = "spawn_agent"

// Config is what a Monitor needs besides the journal.
type Config struct {
	// Actions is each detector's action (Actions); a detector absent
	// does not run. Nil: every detector with its default action.
	Actions map[string]string
	// DataDir is the server's data directory: a call naming it is a probe
	// for secrets. "": not checked.
	DataDir string
	// WorkspaceRoot holds the sessions' workspaces (inside DataDir, by
	// default): a path under it is not a probe of the data directory.
	WorkspaceRoot string
	// Secrets indexes the fragments of the vault's values (nil: none).
	Secrets *SecretIndex
	// Tree: the session is, or may become, part of a tree of sub-agents,
	// and what the tree-wide detectors count is kept for its tree's record
	// (TreePending, ApplyTree). False: nothing is kept for it.
	Tree bool
}

// Monitor runs the detectors over one session's journal.
type Monitor struct {
	cfg Config
	st  state
}

// state is what the detectors keep between events; it encodes to JSON.
type state struct {
	// Steps counts the monitor steps; StepKey is the latest one's turn
	// and step.
	Steps   int    `json:"steps"`
	StepKey string `json:"step_key,omitempty"`
	// Calls are the tool calls requested and not yet finished: their tool
	// and arguments hash (repeated_failure) and their egress target.
	Calls map[string]call `json:"calls,omitempty"`
	// Refused, Permission: the windows of refused connections and of
	// permission errors.
	Refused    window `json:"refused,omitempty"`
	Permission window `json:"permission,omitempty"`
	// Failures counts, by tool and arguments hash, the calls that failed.
	Failures map[string]window `json:"failures,omitempty"`
	// Coverage is, by secret name, which of its bytes were seen in calls
	// toward hosts (a bitset: positions only, never a byte of the value),
	// and the calls that showed them.
	Coverage map[string]*coverage `json:"coverage,omitempty"`
	// Journaled is, by detector (journalKey), the newest evidence seq of
	// its journaled findings, and JournaledAt the summaries of those of
	// them whose newest evidence is that seq: a finding's newest evidence
	// is the event that completed it, so findings come in that order, and
	// two of one detector on one event are told apart by their summaries.
	Journaled   map[string]int64    `json:"journaled,omitempty"`
	JournaledAt map[string][]string `json:"journaled_at,omitempty"`
	// TreeOut is what this session's events add to its tree's record and
	// was not applied to it yet (tree.go).
	TreeOut []treeContrib `json:"tree_out,omitempty"`
}

type call struct {
	Tool string `json:"tool"`
	Key  string `json:"key"`
}

// New returns a Monitor with no history.
func New(cfg Config) *Monitor {
	if cfg.Actions == nil {
		cfg.Actions, _ = Actions(nil, "")
	}
	return &Monitor{cfg: cfg}
}

// State encodes what the detectors kept, for a snapshot.
func (m *Monitor) State() (json.RawMessage, error) {
	if m == nil {
		return nil, nil
	}
	raw, err := json.Marshal(&m.st)
	if err != nil {
		return nil, fmt.Errorf("encode the monitor's state: %w", err)
	}
	return raw, nil
}

// Restore sets the detectors' state from State's encoding.
func (m *Monitor) Restore(raw json.RawMessage) error {
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("decode the monitor's state: %w", err)
	}
	m.st = st
	return nil
}

// Reset forgets everything observed (the journal is read again).
func (m *Monitor) Reset() {
	if m != nil {
		m.st = state{}
	}
}

// Journaled reports whether f was journaled already: a replay of the
// journal finds again what the live run found and journaled.
func (m *Monitor) Journaled(f *Finding) bool {
	k := journalKey(&f.MonitorFindingData)
	at, last := m.st.Journaled[k], f.last()
	if last != at {
		return last < at
	}
	keys, ok := m.st.JournaledAt[k]
	// A state saved before JournaledAt was kept: the newest seq is all
	// it knows.
	return !ok || slices.Contains(keys, f.Summary)
}

// journalKey orders a finding among those journaled: a tree-wide finding
// comes when the tree's record is updated, after the session's own
// findings of later events, so it is ordered apart.
func journalKey(d *lt.MonitorFindingData) string {
	if len(d.TreeEvidence) > 0 {
		return d.Detector + "@tree"
	}
	return d.Detector
}

// on reports whether detector runs.
func (m *Monitor) on(detector string) bool {
	_, ok := m.cfg.Actions[detector]
	return ok
}

// Observe folds one journal event into the detectors' state and returns
// what they found (most events find nothing, and decode nothing).
func (m *Monitor) Observe(ev lt.Event) []Finding {
	if m == nil || len(m.cfg.Actions) == 0 {
		// No detector runs (the spec turned them all off): nothing to
		// decode, count or keep.
		return nil
	}
	var out []Finding
	found := func(detector, severity, summary string, evidence []int64) {
		if !m.on(detector) {
			return
		}
		out = append(out, Finding{
			MonitorFindingData: lt.MonitorFindingData{Detector: detector, Severity: severity, Summary: summary, Evidence: evidence, Action: m.cfg.Actions[detector]},
			TurnID:             ev.TurnID, Step: ev.Step,
		})
	}
	switch ev.Type {
	case lt.EventToolRequested:
		d, err := lt.DataAs[lt.ToolRequestedData](ev)
		if err != nil {
			return nil
		}
		m.step(ev.TurnID, d.Step)
		m.requested(ev.Seq, ev.TurnID, &d, found)
	case lt.EventToolCompleted:
		if !m.on(EscapeSignatures) && !m.on(RepeatedFailure) {
			return nil // only the permission errors and the calls' ends
		}
		d, err := lt.DataAs[lt.ToolCompletedData](ev)
		if err != nil {
			return nil
		}
		delete(m.st.Calls, d.CallID)
		if permissionError(string(d.Output)) {
			m.permission(ev.Seq, found)
		}
	case lt.EventToolFailed:
		d, err := lt.DataAs[lt.ToolFailedData](ev)
		if err != nil {
			return nil
		}
		m.failed(ev.Seq, &d, found)
	case lt.EventNetworkConnection:
		if !m.on(RefusedConnections) {
			return nil
		}
		d, err := lt.DataAs[lt.NetworkConnectionData](ev)
		if err != nil {
			return nil
		}
		m.connection(ev, &d, found)
	case lt.EventMonitorFinding:
		d, err := lt.DataAs[lt.MonitorFindingData](ev)
		if err != nil || len(d.Evidence) == 0 {
			return nil
		}
		if m.st.Journaled == nil {
			m.st.Journaled, m.st.JournaledAt = map[string]int64{}, map[string][]string{}
		}
		k, last := journalKey(&d), d.Evidence[len(d.Evidence)-1]
		switch at := m.st.Journaled[k]; {
		case last > at:
			m.st.Journaled[k], m.st.JournaledAt[k] = last, []string{d.Summary}
		case last == at && !slices.Contains(m.st.JournaledAt[k], d.Summary):
			m.st.JournaledAt[k] = append(m.st.JournaledAt[k], d.Summary)
		}
	}
	return out
}

// step counts a monitor step when a call comes from another step.
func (m *Monitor) step(turnID string, step int) {
	key := fmt.Sprintf("%s/%d", turnID, step)
	if key != m.st.StepKey {
		m.st.Steps++
		m.st.StepKey = key
	}
}

type foundFunc func(detector, severity, summary string, evidence []int64)

// requested reads a call's arguments: probes, escape attempts and what it
// sends toward hosts.
func (m *Monitor) requested(seq int64, turnID string, d *lt.ToolRequestedData, found foundFunc) {
	if m.st.Calls == nil {
		m.st.Calls = map[string]call{}
	}
	if len(m.st.Calls) >= maxTrackedCalls {
		clear(m.st.Calls) // calls that never finished (a crash): forget them
	}
	m.st.Calls[d.CallID] = call{Tool: d.Tool, Key: d.Tool + "/" + d.ArgumentsSHA256}
	if d.Tool == SpawnTool {
		// Its arguments (the child's instructions, input, script) are
		// only passed on: the child's own calls are what the detectors
		// read, in the child's journal, with the same settings.
		return
	}
	if !m.on(SecretProbe) && !m.on(EscapeSignatures) && !m.on(SecretLikeEgress) {
		return // no detector reads the arguments
	}
	text := argumentText(d.Arguments)
	if text == "" {
		return
	}
	shell := d.Tool == "shell"
	norm := normalize(text)
	if m.on(SecretProbe) {
		if what, sev := secretProbe(norm, m.outsideWorkspaces(text), m.cfg.DataDir); what != "" {
			found(SecretProbe, sev, fmt.Sprintf("%s %s", callName(d.Tool), what), []int64{seq})
			m.contribute(treeContrib{Kind: treeProbe, Seq: seq, TurnID: turnID, Step: d.Step, MonStep: m.st.Steps})
		}
	}
	if m.on(EscapeSignatures) {
		if what := escapeAttempt(norm, shell); what != "" {
			found(EscapeSignatures, High, fmt.Sprintf("%s %s", callName(d.Tool), what), []int64{seq})
		}
	}
	if m.on(SecretLikeEgress) {
		if host, ok := egressTarget(d.Tool, norm, d.Arguments); ok {
			m.egress(seq, turnID, d.Step, d.Tool, host, text, found)
		}
	}
}

// outsideWorkspaces is text without the workspace root's path.
func (m *Monitor) outsideWorkspaces(text string) string {
	if m.cfg.DataDir == "" || m.cfg.WorkspaceRoot == "" {
		return text
	}
	return strings.ReplaceAll(text, m.cfg.WorkspaceRoot, "")
}

func callName(tool string) string { return "a " + tool + " call" }

// failed reads a call's failure: a refused spawn, a permission error, the
// same action failing again.
func (m *Monitor) failed(seq int64, d *lt.ToolFailedData, found foundFunc) {
	c, known := m.st.Calls[d.CallID]
	if !d.Retry {
		delete(m.st.Calls, d.CallID)
	}
	if d.Code == lt.ToolFailedCapabilityWidening {
		found(CapabilityWidening, Medium, "a spawn_agent call asked for more than the session holds and was refused", []int64{seq})
	}
	if permissionError(d.Error) || permissionError(string(d.Output)) {
		m.permission(seq, found)
	}
	if !known || d.Retry || d.Refused != "" {
		// A transient attempt runs again as the same call; a refused call
		// never ran (the loop detector and the policies see those).
		return
	}
	if m.st.Failures == nil {
		m.st.Failures = map[string]window{}
	}
	if len(m.st.Failures) >= maxTrackedActions {
		clear(m.st.Failures)
	}
	w := m.st.Failures[c.Key].add(hit{Seq: seq, Step: m.st.Steps}, 1<<30)
	if len(w) >= failureThreshold {
		found(RepeatedFailure, Low, fmt.Sprintf("the same %s call (same arguments) failed %d times", c.Tool, len(w)), w.seqs())
		delete(m.st.Failures, c.Key)
		return
	}
	m.st.Failures[c.Key] = w
}

// permission counts a permission error toward a burst.
func (m *Monitor) permission(seq int64, found foundFunc) {
	m.st.Permission = m.st.Permission.add(hit{Seq: seq, Step: m.st.Steps}, permissionWindow)
	if len(m.st.Permission) >= permissionBurst {
		found(EscapeSignatures, Medium, fmt.Sprintf("a burst of %d permission errors within %d steps", len(m.st.Permission), permissionWindow), m.st.Permission.seqs())
		m.st.Permission = nil
	}
}

// connection counts a refused connection the agent made.
func (m *Monitor) connection(ev lt.Event, d *lt.NetworkConnectionData, found foundFunc) {
	seq := ev.Seq
	if d.Allowed || d.Index < 0 {
		return // allowed, or an MCP listing's connection (not the agent's)
	}
	if d.Tool == "browser" && vendorHost(d.Host) {
		// Chromium's own background requests (updates, safe browsing,
		// metrics) during a browser call: the browser's, not the agent's.
		return
	}
	if !m.on(RefusedConnections) {
		return
	}
	key := fmt.Sprintf("%s:%d", d.Host, d.Port)
	m.st.Refused = m.st.Refused.add(hit{Seq: seq, Step: m.st.Steps, Key: key}, refusedWindow)
	hosts := m.st.Refused.distinctKeys()
	if hosts >= refusedHosts || len(m.st.Refused) >= refusedCount {
		found(RefusedConnections, Medium, fmt.Sprintf("%d refused connections to %d destinations within %d steps", len(m.st.Refused), hosts, refusedWindow), m.st.Refused.seqs())
		m.st.Refused = nil
		// Counted here: the tree does not count them again.
		m.contribute(treeContrib{Kind: treeRefusedSpent, Seq: seq})
		return
	}
	m.contribute(treeContrib{Kind: treeRefused, Seq: seq, TurnID: ev.TurnID, Step: d.Step, MonStep: m.st.Steps, Key: key})
}

// egress checks what a call sends toward host: a high-entropy string, a
// whole secret's value (the journal holds its redaction marker), or
// fragments of one, joined over the calls so far.
func (m *Monitor) egress(seq int64, turnID string, step int, tool, host, text string, found foundFunc) {
	toward := "toward " + host
	if host == "" {
		toward = "toward a host"
	}
	if name := redactedName(text); name != "" {
		found(SecretLikeEgress, High, fmt.Sprintf("%s sends the value of secret %s %s", callName(tool), name, toward), []int64{seq})
		return
	}
	if n := highEntropy(text); n > 0 {
		found(SecretLikeEgress, High, fmt.Sprintf("%s sends a high-entropy string (%d characters) %s", callName(tool), n, toward), []int64{seq})
		return
	}
	if m.cfg.Secrets == nil {
		return
	}
	done, carried := m.cfg.Secrets.match(text, &m.st, seq)
	for _, name := range done {
		c := m.st.Coverage[name]
		found(SecretLikeEgress, High, fmt.Sprintf("fragments of secret %s (%d%% of it) were sent %s over %d calls", name, c.percent(), toward, c.calls()), c.Calls)
		delete(m.st.Coverage, name)
	}
	if !m.cfg.Tree {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(carried)) {
		c := carried[name]
		if slices.Contains(done, name) {
			// Found here: the tree does not join these fragments again.
			m.contribute(treeContrib{Kind: treeFragmentsSpent, Seq: seq, Key: name})
			continue
		}
		m.contribute(treeContrib{Kind: treeFragment, Seq: seq, TurnID: turnID, Step: step, Key: name, N: c.N, Bits: c.Bits})
	}
}

// Renumber moves every seq after after by delta: the runner's unsaved
// events, which the detectors read at the seqs they had then, were
// appended after another writer's (delta of them) and carry new seqs.
func (m *Monitor) Renumber(after, delta int64) {
	if m == nil || delta == 0 {
		return
	}
	shift := func(seq *int64) {
		if *seq > after {
			*seq += delta
		}
	}
	shiftWindow := func(w window) {
		for i := range w {
			shift(&w[i].Seq)
		}
	}
	st := &m.st
	shiftWindow(st.Refused)
	shiftWindow(st.Permission)
	for _, w := range st.Failures {
		shiftWindow(w)
	}
	for _, c := range st.Coverage {
		for i := range c.Calls {
			shift(&c.Calls[i])
		}
	}
	for k, seq := range st.Journaled {
		shift(&seq)
		st.Journaled[k] = seq
	}
	for i := range st.TreeOut {
		shift(&st.TreeOut[i].Seq)
	}
}

// RenumberEvidence is Renumber for a finding's evidence (one the runner
// holds, or one in a monitor.finding not yet saved).
func RenumberEvidence(d *lt.MonitorFindingData, after, delta int64) {
	for i, seq := range d.Evidence {
		if seq > after {
			d.Evidence[i] = seq + delta
		}
	}
}
