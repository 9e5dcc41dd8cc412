package runner

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// execPlain answers link.MethodExec for a session's plain workspace (no
// environment opened): the command runs through the runner's sandbox
// backend; its output goes back as output frames, then the result.
func (r *Runner) execPlain(ctx context.Context, req *link.Request, p *link.ExecParams) (any, error) {
	ws, err := r.workspace(p.Session)
	if err != nil {
		return nil, err
	}
	spec := sandbox.Spec{SessionID: p.Session, Workspace: ws, Limits: r.cfg.Limits}
	res, err := r.cfg.Backend.Exec(spec).Run(ctx, &tool.ExecRequest{
		Command: p.Command, Env: p.Env, Timeout: time.Duration(p.TimeoutMS) * time.Millisecond, MaxOutputBytes: p.MaxOutputBytes,
	})
	if err != nil {
		return nil, link.Errorf(link.CodeFailed, "run the command: %v", err)
	}
	return sendExecResult(ctx, req, res)
}

// workspace returns the session's workspace directory, made if missing.
// The session id was checked to be one path element (no separator, no
// dot first), so the directory is always right under r.work.
func (r *Runner) workspace(session string) (string, error) {
	dir := filepath.Join(r.work, session)
	if filepath.Dir(dir) != r.work {
		return "", link.Errorf(link.CodeBadParams, "session: %q is not one path element", session)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", link.Errorf(link.CodeFailed, "make the workspace: %v", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return "", link.Errorf(link.CodeFailed, "the workspace of %s is not a directory", session)
	}
	return dir, nil
}
