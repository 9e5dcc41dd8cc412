package hub

import (
	"context"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
)

// DefaultMaxExecOutput bounds what Exec keeps of each stream when the
// params set no MaxOutputBytes.
const DefaultMaxExecOutput = 1 << 20

// ExecOutput is an exec call's result with its output.
type ExecOutput struct {
	link.ExecResult
	Stdout, Stderr string
}

// Exec runs p on r (link.MethodExec) and returns how it ended with its
// output. The runner may send more than it was asked for: Exec keeps at
// most p.MaxOutputBytes (else DefaultMaxExecOutput) of each stream and
// sets Truncated past it, so a runner cannot fill the server's memory. A
// cancelled Exec returns once the runner answered (its command ended).
func Exec(ctx context.Context, r *Runner, p *link.ExecParams) (*ExecOutput, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("exec on runner %s: %w", r.Row.Name, err)
	}
	limit := p.MaxOutputBytes
	if limit == 0 {
		limit = DefaultMaxExecOutput
	}
	var stdout, stderr []byte
	truncated := false
	keep := func(buf *[]byte, data []byte) {
		room := limit - len(*buf)
		if len(data) > room {
			data, truncated = data[:max(room, 0)], true
		}
		*buf = append(*buf, data...)
	}
	var res link.ExecResult
	// A cancelled command is waited for: once Exec returns, nothing of it
	// runs on the runner (a call run again never overlaps it).
	err := r.Conn.Call(ctx, link.MethodExec, p, &res, &link.CallOptions{AwaitCancelled: true, OnOutput: func(stream string, data []byte) {
		if stream == link.StreamStdout {
			keep(&stdout, data)
		} else {
			keep(&stderr, data)
		}
	}})
	if err != nil {
		return nil, fmt.Errorf("exec on runner %s: %w", r.Row.Name, err)
	}
	res.Truncated = res.Truncated || truncated
	return &ExecOutput{ExecResult: res, Stdout: string(stdout), Stderr: string(stderr)}, nil
}
