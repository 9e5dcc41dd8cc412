package link

import (
	"fmt"
	"regexp"
)

// MethodExec runs one command in a session's workspace on the runner,
// through the runner's sandbox backend: params ExecParams, result
// ExecResult, the command's stdout and stderr streamed as output.
const MethodExec = "exec"

// ExecParams are an exec call's params. The server chooses Session; the
// runner only checks it is a safe directory name.
type ExecParams struct {
	Session string `json:"session"`
	// EnvID, when set, runs the command in that open environment (its
	// workspace, limits and egress proxy) instead of the session's plain
	// workspace.
	EnvID          string            `json:"env_id,omitempty"`
	Command        string            `json:"command"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutMS      int64             `json:"timeout_ms,omitempty"`
	MaxOutputBytes int               `json:"max_output_bytes,omitempty"`
}

// ExecResult is how an exec call's command ended (tool.ExecResult's
// fields, its output aside: that came as output frames).
type ExecResult struct {
	ExitCode  int    `json:"exit_code"`
	Truncated bool   `json:"truncated,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	Signal    string `json:"signal,omitempty"`
	Limit     string `json:"limit,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Bounds of ExecParams.
const (
	MaxCommandBytes = 256 << 10
	MaxEnvVars      = 64
)

var (
	sessionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// Check reports the first field of p that is not valid, naming it.
func (p *ExecParams) Check() error {
	if !sessionPattern.MatchString(p.Session) {
		return fmt.Errorf("session: %q is not a session id", truncate(p.Session))
	}
	if p.EnvID != "" {
		if err := CheckHandle("env_id", p.EnvID); err != nil {
			return err
		}
	}
	if p.Command == "" || len(p.Command) > MaxCommandBytes {
		return fmt.Errorf("command: must be 1 to %d bytes", MaxCommandBytes)
	}
	if len(p.Env) > MaxEnvVars {
		return fmt.Errorf("env: at most %d variables", MaxEnvVars)
	}
	for k := range p.Env {
		if !envNamePattern.MatchString(k) {
			return fmt.Errorf("env: %q is not a variable name", truncate(k))
		}
	}
	if p.TimeoutMS < 0 {
		return fmt.Errorf("timeout_ms: must be >= 0, got %d", p.TimeoutMS)
	}
	if p.MaxOutputBytes < 0 {
		return fmt.Errorf("max_output_bytes: must be >= 0, got %d", p.MaxOutputBytes)
	}
	return nil
}
