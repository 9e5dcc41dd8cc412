package e2e

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
)

// The crash test's size. A wave is a batch of sessions created together; a
// new wave starts when the previous one has finished before the planned
// kills are spent, so the kill count never depends on how fast this machine
// runs the sessions.
const (
	crashSessionsPerWave = 12
	crashMinKills        = 50
	crashPlannedKills    = 56
	crashMaxWaves        = 8
	// crashSettleTimeout bounds the quiet phase after the last kill, in
	// which every session must finish.
	crashSettleTimeout = 90 * time.Second
)

// TestCrashRecovery SIGKILLs the server at many points while scripted
// sessions run read tools (read_file, list_files), idempotent effects
// (write_file, and shell overridden to idempotent, which records its
// idempotency key outside the server) and irreversible effects (shell, which
// appends a line to a counter file outside the server). After every restart
// it decides each in-doubt effect from that outside evidence, as an operator
// would. Then every session must have finished its turn with a gap-free
// journal, no irreversible command may have run twice (nor be missing), and
// every run of an idempotent command must have seen the one key the journal
// recorded for its call (DESIGN.md principle 3).
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	began := time.Now()
	seed1, seed2 := rand.Uint64(), rand.Uint64()
	t.Logf("kill-point seed: %d %d (the assertions hold for any seed)", seed1, seed2)

	// The shell commands record what ran in files outside the workspace
	// (the test's evidence, independent of the server): a sandbox rightly
	// forbids that, so this test runs them locally.
	run := &crashRun{
		workload: newWorkload(t, rand.New(rand.NewPCG(seed1, seed2))),
		srv:      startServer(t, "--sandbox", "local"),
	}
	run.createWave()
	for run.kills < crashPlannedKills {
		if run.allDone() {
			if run.waves == crashMaxWaves {
				break
			}
			run.createWave()
		}
		run.runToKillPoint()
		run.srv.restart()
		run.kills++
	}
	run.settle()
	require.GreaterOrEqual(t, run.kills, crashMinKills,
		"the server was killed only %d times: %d waves of sessions finished too fast", run.kills, run.waves)

	st := run.verify(run.srv.api)
	t.Logf("crash recovery: %d kills (%s), %d sessions in %d waves, %d events; %d approvals; in-doubt decisions: %d happened, %d did_not_happen; "+
		"re-runs after a crash: %d irreversible (after did_not_happen), %d idempotent, %d read; "+
		"%d restarts refused for a data directory still locked; %s in all",
		run.kills, run.killModes(), len(run.sessions), run.waves, st.events, run.approvals, run.happened, run.didNotHappen,
		st.irreversibleReruns, st.idempotentReruns, st.readReruns, run.srv.lockRefusals, time.Since(began).Round(time.Millisecond))
}

// crashRun is the state of one crash test: the workload, the one server
// it runs on, and the kills.
type crashRun struct {
	*workload
	srv   *server
	waves int
	kills int
	modes map[string]int
}

// createWave creates crashSessionsPerWave sessions: every other one
// irreversible, every third one asking for approvals.
func (r *crashRun) createWave() {
	r.t.Helper()
	r.waves++
	for i := range crashSessionsPerWave {
		cs := r.planSession(fmt.Sprintf("w%ds%02d", r.waves, i+1), i%2 == 0)
		cs.approval = i%3 == 1
		r.create(r.srv.api, cs)
	}
}

// runToKillPoint lets the server run until a kill point drawn at random:
// right after the restart (while it recovers), after a random delay, or
// after a random number of new journal events. Meanwhile it decides the
// in-doubt effects the recovery raised.
func (r *crashRun) runToKillPoint() {
	r.t.Helper()
	if r.modes == nil {
		r.modes = map[string]int{}
	}
	var mode string
	var until time.Time
	events := -1
	switch k := r.rng.IntN(10); {
	case k < 2:
		mode, until = "recovering", time.Now().Add(time.Duration(r.rng.IntN(25))*time.Millisecond)
	case k < 6:
		mode, until = "delay", time.Now().Add(time.Duration(25+r.rng.IntN(300))*time.Millisecond)
	default:
		// Bounded in time too: the sessions may be waiting for decisions
		// or be nearly done.
		mode, until, events = "events", time.Now().Add(2*time.Second), 1+r.rng.IntN(12)
	}
	r.modes[mode]++
	base := int64(-1)
	for {
		total := r.poll(r.api)
		if base < 0 {
			base = total
		}
		if events > 0 && total-base >= int64(events) {
			return
		}
		if !time.Now().Before(until) || r.allDone() {
			return
		}
		time.Sleep(pollInterval)
	}
}

// settle lets the last incarnation run undisturbed until every session has
// finished, deciding in-doubt effects as they come.
func (r *crashRun) settle() {
	r.t.Helper()
	waitFor(r.t, crashSettleTimeout, "every session to finish after the last kill", func() (bool, error) {
		r.poll(r.api)
		return r.allDone(), nil
	})
}

func (r *crashRun) killModes() string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(r.modes)) {
		parts = append(parts, fmt.Sprintf("%d %s", r.modes[m], m))
	}
	return strings.Join(parts, ", ")
}

// api is the one server's client, for workload.poll.
func (r *crashRun) api() *client.Client { return r.srv.api }
