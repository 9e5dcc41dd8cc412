package bench

import (
	"context"
	"fmt"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The paired workspace run measures what a workspace's size costs a step
// as a ratio that the machine's own drift does not move: a shared machine
// is quicker or slower by a third for seconds at a time, and two runs one
// after the other (Workspace, once empty and once with the tree) put the
// ratio of their write_file steps anywhere from 1.14 to 2.19 for the same
// build. Here the empty workspace's session and the tree's run in one
// server, in turn, two measured steps at a time (a write_file and a shell
// step), so that whatever the machine does weighs on both alike. A
// session waits for its turn in a step that is not measured: its first
// (the seed) and a read-only step after every two measured ones. The two
// write different bytes (a blob the other stored already would cost
// nothing to store), and the tree's session is created first, so that
// its creation's commit is not in the other's steps.
//
// A step's interval (from its model request to the next) holds its call,
// its snapshot and the commit of the step before's end, which is made
// durable with its own request: here a write_file step's holds the turn
// step's light commit and a shell step's the write_file step's, so its
// times are not those of Workspace, whose steps alternate without turns.

// The inputs of the paired sessions: the plan tells them apart by it.
const (
	pairEmpty = "benchmark: an empty workspace"
	pairTree  = "benchmark: a workspace holding the tree"
)

// pairKind is what position p of pairPlan measures: a write_file step, a
// shell step, or nothing (the seed at 0, the turn steps, and from the
// final answer on).
func pairKind(steps int) func(p int) string {
	last := pairPosition(steps)
	return func(p int) string {
		switch {
		case p <= 0 || p > last:
			return ""
		case (p-1)%3 == 0:
			return kindWrite
		case (p-1)%3 == 1:
			return kindShell
		default:
			return ""
		}
	}
}

// pairPosition is the position of the kth measured step of pairPlan.
func pairPosition(k int) int { return k + (k-1)/2 }

// pairPlan seeds each session (copying the tree into one of them only),
// then takes steps measured steps, a write_file and a shell step in turn,
// with a turn step after every two, then answers. A session waits for its
// turn before its seed and in each turn step, and gives the turn to the
// other in each turn step and when it answers.
func pairPlan(steps int, turns *turnstile) func(*model.Request) *model.Response {
	last, kind := pairPosition(steps), pairKind(steps)
	return func(req *model.Request) *model.Response {
		p, who := req.Position, inputOf(req)
		tag := "e" // what the session writes: its own bytes
		if who == pairTree {
			tag = "t"
		}
		switch {
		case p == 0:
			turns.wait(who)
			return call("bench_seed", map[string]any{"tree": who == pairTree})
		case p > last:
			turns.finish(who)
			return answer("done")
		}
		switch kind(p) {
		case kindWrite:
			return call("write_file", map[string]any{"path": fmt.Sprintf("bench/w%d.txt", p), "content": fmt.Sprintf("step %s%d\n", tag, p)})
		case kindShell:
			return call("shell", map[string]any{"command": fmt.Sprintf("echo %s%d >> bench/log.txt", tag, p)})
		}
		turns.pass(who)
		turns.wait(who)
		return call("noop", map[string]any{"i": p})
	}
}

// inputOf is the session's input: its first person's message.
func inputOf(req *model.Request) string {
	for _, m := range req.Messages {
		if m.Role == model.RoleUser {
			return m.Text
		}
	}
	return ""
}

// turnstile lets two sessions take turns. The turn is one session's at a
// time; a session that is done leaves it to the other for good.
type turnstile struct {
	ctx     context.Context // the run's: a wait ends with it
	mu      sync.Mutex
	holder  string
	other   map[string]string
	done    map[string]bool
	changed chan struct{} // closed, and made anew, when the turn changes
}

// newTurnstile gives the turn to first; second waits for it.
func newTurnstile(ctx context.Context, first, second string) *turnstile {
	return &turnstile{ctx: ctx, holder: first, other: map[string]string{first: second, second: first},
		done: map[string]bool{}, changed: make(chan struct{})}
}

// wait returns once it is who's turn, or the other session is done, or
// the run's context ended.
func (t *turnstile) wait(who string) {
	for {
		t.mu.Lock()
		if t.holder == who || t.done[t.other[who]] {
			t.mu.Unlock()
			return
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-t.ctx.Done():
			return
		}
	}
}

// pass gives who's turn to the other session (a second pass in a row, a
// model call made again, changes nothing).
func (t *turnstile) pass(who string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.holder == who {
		t.holder = t.other[who]
		close(t.changed)
		t.changed = make(chan struct{})
	}
}

// finish marks who done and passes its turn.
func (t *turnstile) finish(who string) {
	t.mu.Lock()
	t.done[who] = true
	t.mu.Unlock()
	t.pass(who)
	t.mu.Lock()
	close(t.changed) // wakes a wait that looks at done
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

// WorkspacePair runs the workspace scenario with an empty workspace and
// with tree copied in, in one server and in turn (see above), each
// session taking cfg.Steps measured steps (default 30), write_file and
// shell in turn. It returns the empty workspace's result, then the tree's.
// Sessions and Rounds are not used.
func WorkspacePair(ctx context.Context, cfg Config, tree string) ([]*WorkspaceResult, error) {
	return workspacePair(ctx, cfg, tree, nil)
}

// workspacePair is WorkspacePair with the sessions' specs changed by
// respec, when set (a test's session that fails).
func workspacePair(ctx context.Context, cfg Config, tree string, respec func(input string, spec *lt.AgentSpec)) ([]*WorkspaceResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := checkTree(tree); err != nil {
		return nil, err
	}
	if cfg.Steps <= 0 {
		cfg.Steps = 30
	}
	ctx, cancel := context.WithCancel(ctx)
	seed := &seedTool{src: tree}
	turns := newTurnstile(ctx, pairEmpty, pairTree)
	// Stateless: the model's lock is not held while a session waits for
	// its turn, so the other's calls go on.
	r, err := openWorkspaceRig(ctx, cfg, 4, &benchModel{next: pairPlan(cfg.Steps, turns), stateless: true}, seed)
	if err != nil {
		cancel()
		return nil, err
	}
	defer r.close()
	// Before the rig closes: if one session failed, the other may be
	// waiting for a turn that never comes, in a model call the engine's
	// stop waits for.
	defer cancel()
	spec := &lt.AgentSpec{
		Model:    lt.ModelSpec{Provider: benchProvider, Name: "workspace"},
		Tools:    []lt.ToolSpec{{Name: "bench_seed"}, {Name: "write_file"}, {Name: "shell"}, {Name: "noop"}},
		MaxSteps: pairPosition(cfg.Steps) + 2,
	}
	eng := r.nodes[0].eng
	ids := make([]string, 2) // the empty workspace's, then the tree's
	for _, i := range []int{1, 0} {
		input, spec := []string{pairEmpty, pairTree}[i], *spec
		if respec != nil {
			respec(input, &spec)
		}
		s, err := eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &spec, Input: input})
		if err != nil {
			return nil, err
		}
		ids[i] = s.ID
	}
	// Each on its own: a session that fails never passes its turn, so
	// the other's wait is ended (cancel) rather than waited for.
	idle := make(chan error, len(ids))
	for _, id := range ids {
		go func() { idle <- waitIdle(ctx, eng, []string{id}) }()
	}
	for range ids {
		if err := <-idle; err != nil {
			return nil, err
		}
	}
	out := make([]*WorkspaceResult, 0, 2)
	for i, id := range ids {
		t, err := workspaceTimes(ctx, eng, id, pairKind(cfg.Steps))
		if err != nil {
			return nil, err
		}
		res := &WorkspaceResult{
			Sessions: 1, FirstSnapshot: t.snapshots[0], WriteP50: percentile(t.writes, 0.5),
			ShellP50: percentile(t.shells, 0.5), SnapshotP50: percentile(t.snapshots[1:], 0.5),
		}
		if i == 1 {
			res.Tree, res.Files, res.Bytes = tree, seed.files, seed.bytes
		}
		out = append(out, res)
	}
	return out, nil
}
