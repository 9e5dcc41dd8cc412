package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The workspace run measures what a workspace's size costs a step: each
// session's first step copies a tree into its workspace (the seed tool),
// then write_file and shell steps alternate, each checkpointed with a
// snapshot of the workspace. Run once with an empty tree and once with a
// real one, the ratio of their step costs is what the size costs.

// seedTool is the workspace run's first step: it copies its tree into the
// session's workspace. It is a write, so the engine checkpoints after it:
// that checkpoint's snapshot is the tree's first.
type seedTool struct {
	src string

	mu    sync.Mutex
	files int
	bytes int64
}

func (*seedTool) Name() string { return "bench_seed" }
func (*seedTool) Description() string {
	return "Copies the benchmark's tree into the workspace."
}
func (*seedTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (*seedTool) Effect() lt.EffectClass      { return lt.EffectIdempotent }

func (t *seedTool) Run(ctx context.Context, c *tool.Call) (*tool.Result, error) {
	var args struct {
		Tree *bool `json:"tree"` // false: this session's workspace stays empty (WorkspacePair)
	}
	if len(c.Arguments) > 0 {
		if err := json.Unmarshal(c.Arguments, &args); err != nil {
			return nil, fmt.Errorf("bench_seed: arguments: %w", err)
		}
	}
	if t.src == "" || args.Tree != nil && !*args.Tree {
		return &tool.Result{Output: "nothing to copy"}, nil
	}
	files, n, err := copyTree(ctx, t.src, c.Workspace)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.files, t.bytes = files, n
	t.mu.Unlock()
	return &tool.Result{Output: fmt.Sprintf("copied %d files", files)}, nil
}

// copyTree copies the regular files, directories and symbolic links of src
// into dst (other kinds are skipped), and returns the files and bytes
// copied.
func copyTree(ctx context.Context, src, dst string) (files int, bytes int64, err error) {
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			n, err := copyFile(path, to)
			files, bytes = files+1, bytes+n
			return err
		}
		return nil
	})
	return files, bytes, err
}

func copyFile(from, to string) (int64, error) {
	in, err := os.Open(from)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return 0, err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm()|0o200)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	return n, errors.Join(err, out.Close())
}

// workspacePlan seeds (position 0), then alternates write_file (odd
// positions) and shell (even ones) for steps steps, then answers.
func workspacePlan(steps int) func(*model.Request) *model.Response {
	return func(req *model.Request) *model.Response {
		p := req.Position
		switch {
		case p == 0:
			return call("bench_seed", map[string]any{})
		case p > steps:
			return answer("done")
		case p%2 == 1:
			return call("write_file", map[string]any{"path": fmt.Sprintf("bench/w%d.txt", p), "content": fmt.Sprintf("step %d\n", p)})
		default:
			return call("shell", map[string]any{"command": fmt.Sprintf("echo %d >> bench/log.txt", p)})
		}
	}
}

// WorkspaceResult is one workspace run.
type WorkspaceResult struct {
	// Tree is the directory copied in ("" for none: an empty workspace).
	Tree     string
	Sessions int
	Files    int
	Bytes    int64
	// FirstSnapshot is the p50 over the sessions of their first
	// snapshot's time, of the tree just copied in.
	FirstSnapshot time.Duration
	// WriteP50 and ShellP50 are the per-step costs (model call to next
	// model call, the tool's own run and its checkpoint included) of the
	// write_file steps and of the shell steps.
	WriteP50, ShellP50 time.Duration
	// SnapshotP50 is of the snapshots after the first.
	SnapshotP50 time.Duration
}

// Workspace runs cfg.Sessions sessions (default 1) that each copy tree
// into their workspace ("": nothing) and then take cfg.Steps steps
// (default 30), write_file and shell in turn. Rounds is not used.
func Workspace(ctx context.Context, cfg Config, tree string) (*WorkspaceResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := checkTree(tree); err != nil {
		return nil, err
	}
	n := max(cfg.Sessions, 1)
	if cfg.Steps <= 0 {
		cfg.Steps = 30
	}
	seed := &seedTool{src: tree}
	r, err := openWorkspaceRig(ctx, cfg, max(n, 4), &benchModel{next: workspacePlan(cfg.Steps)}, seed)
	if err != nil {
		return nil, err
	}
	defer r.close()
	spec := &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: benchProvider, Name: "workspace"},
		Tools: []lt.ToolSpec{{Name: "bench_seed"}, {Name: "write_file"}, {Name: "shell"}}, MaxSteps: cfg.Steps + 2,
	}
	ids, err := createSessions(ctx, r, n, spec, "benchmark")
	if err != nil {
		return nil, err
	}
	if err := waitIdle(ctx, r.nodes[0].eng, ids); err != nil {
		return nil, err
	}
	var writes, shells, firsts, snaps []time.Duration
	for _, id := range ids {
		t, err := workspaceTimes(ctx, r.nodes[0].eng, id, alternateKind(cfg.Steps))
		if err != nil {
			return nil, err
		}
		writes, shells, snaps = append(writes, t.writes...), append(shells, t.shells...), append(snaps, t.snapshots[1:]...)
		firsts = append(firsts, t.snapshots[0])
	}
	return &WorkspaceResult{
		Tree: tree, Sessions: n, Files: seed.files, Bytes: seed.bytes,
		FirstSnapshot: percentile(firsts, 0.5), WriteP50: percentile(writes, 0.5), ShellP50: percentile(shells, 0.5),
		SnapshotP50: percentile(snaps, 0.5),
	}, nil
}

// openWorkspaceRig opens a workspace run's rig: its model, its seed tool,
// and the sandbox a server would use: with bwrap, a shell step's
// checkpoint reads only what the command changed (the engine trusts the
// workspace's watches only there); with the local backend every such
// checkpoint walks.
func openWorkspaceRig(ctx context.Context, cfg Config, workers int, m *benchModel, seed *seedTool) (*rig, error) {
	sb, _ := sandbox.Detect(ctx, sandbox.DetectOptions{})
	return openWith(ctx, cfg, workers, rigExtras{
		providers: map[string]model.Provider{benchProvider: m},
		tools:     []tool.Tool{seed},
		sandbox:   sb,
	})
}

// checkTree checks the tree a workspace run copies in ("": none).
func checkTree(tree string) error {
	if tree == "" {
		return nil
	}
	info, err := os.Stat(tree)
	if err != nil {
		return fmt.Errorf("bench: the workspace tree: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("bench: the workspace tree %s is not a directory", tree)
	}
	return nil
}

// alternateKind is what position p of workspacePlan measures, for steps
// steps: not the seed, nor the final answer.
func alternateKind(steps int) func(p int) string {
	return func(p int) string {
		switch {
		case p <= 0 || p > steps:
			return ""
		case p%2 == 1:
			return kindWrite
		default:
			return kindShell
		}
	}
}

// The kinds of step a workspace run measures.
const (
	kindWrite = "write_file"
	kindShell = "shell"
)

// sessionTimes are one workspace session's measured times.
type sessionTimes struct {
	writes, shells []time.Duration
	// snapshots are in order, the seed's first.
	snapshots []time.Duration
}

// workspaceTimes reads one session's journal: each step's time by its
// tool (kind, from its position in the plan: "" for a step not measured),
// and each snapshot's (from the checkpoint's creation to its event, which
// is appended once the snapshot is taken): the seed's first, then those of
// the steps measured.
func workspaceTimes(ctx context.Context, eng *engine.Engine, id string, kind func(position int) string) (*sessionTimes, error) {
	evs, err := eng.ListEvents(ctx, id, 0, 10000)
	if err != nil {
		return nil, err
	}
	out := &sessionTimes{}
	position := -1
	var last time.Time
	for _, ev := range evs {
		switch ev.Type {
		case lt.EventModelRequested, lt.EventTurnCompleted:
			switch kind(position) {
			case kindWrite:
				out.writes = append(out.writes, ev.Time.Sub(last))
			case kindShell:
				out.shells = append(out.shells, ev.Time.Sub(last))
			}
			var d lt.ModelRequestedData
			if ev.Type == lt.EventModelRequested {
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					return nil, fmt.Errorf("bench: %s of session %s: %w", ev.Type, id, err)
				}
			}
			position, last = d.Position, ev.Time
		case lt.EventCheckpointCreated:
			var d lt.CheckpointCreatedData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("bench: %s of session %s: %w", ev.Type, id, err)
			}
			if d.Checkpoint.Kind == lt.CheckpointStep && (position == 0 || position > 0 && kind(position) != "") {
				out.snapshots = append(out.snapshots, ev.Time.Sub(d.Checkpoint.CreatedAt))
			}
		}
	}
	if len(out.snapshots) < 2 || len(out.writes) == 0 || len(out.shells) == 0 {
		return nil, fmt.Errorf("bench: session %s took %d write_file steps, %d shell steps and %d snapshots: too few to measure",
			id, len(out.writes), len(out.shells), len(out.snapshots))
	}
	return out, nil
}

// PrintWorkspace writes the workspace runs' table; the ratios are of each
// run's write_file and shell steps to the first run's (an empty
// workspace's).
func PrintWorkspace(w io.Writer, runs []*WorkspaceResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workspace\tfiles\tMiB\tfirst snapshot\tp50 write_file step\tp50 shell step\tp50 snapshot\twrite_file ratio\tshell ratio\t")
	for _, r := range runs {
		tree := r.Tree
		if tree == "" {
			tree = "(empty)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%s\t%s\t%s\t%.2f×\t%.2f×\t\n", tree, r.Files, float64(r.Bytes)/(1<<20),
			r.FirstSnapshot.Round(time.Microsecond), r.WriteP50.Round(time.Microsecond), r.ShellP50.Round(time.Microsecond),
			r.SnapshotP50.Round(time.Microsecond), float64(r.WriteP50)/float64(runs[0].WriteP50), float64(r.ShellP50)/float64(runs[0].ShellP50))
	}
	tw.Flush()
}
