package mcp

import (
	"context"
	"errors"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
)

// DefaultStopGrace is how long a stdio server may take to exit once its
// standard input is closed, before it is killed.
const DefaultStopGrace = 2 * time.Second

// maxLineBytes bounds one JSON-RPC message from a stdio server.
const maxLineBytes = 16 << 20

// StartFunc starts a program in the session's sandbox: the session's
// environment.Environment's Start (a *sandbox.Process locally, a relay of
// a runner's program remotely).
type StartFunc func(ctx context.Context, req *sandbox.StartRequest) (environment.Process, error)

// Stdio is the Dialer of a stdio server: each Dial starts Command in the
// session's sandbox and speaks MCP over its standard input and output.
type Stdio struct {
	Start StartFunc
	// Command is the shell command line (CommandLine builds one from a
	// program and its arguments).
	Command string
	// Program is the program Command runs (for the sandbox's check that
	// it can see it; "" when unknown).
	Program string
	Env     map[string]string
	// StopGrace: see DefaultStopGrace (the default).
	StopGrace time.Duration
}

// Dial implements Dialer.
func (d *Stdio) Dial(ctx context.Context) (*Link, error) {
	if d.Start == nil {
		return nil, errors.New("stdio server: no sandbox to start it in")
	}
	p, err := d.Start(ctx, &sandbox.StartRequest{Command: d.Command, Program: d.Program, Env: d.Env})
	if err != nil {
		return nil, err
	}
	grace := d.StopGrace
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	return &Link{
		Transport: &sdk.IOTransport{Reader: p.Stdout(), Writer: p.Stdin(), MaxLineLength: maxLineBytes},
		Close:     func() { p.Stop(grace) },
		Diagnose: func() string {
			// The process is usually gone by the time the connection
			// broke; give it a moment to be reaped.
			select {
			case <-p.Done():
			case <-time.After(time.Second):
			}
			var parts []string
			if exit := p.Exit(); exit != "" {
				parts = append(parts, "the server process ended ("+exit+")")
			}
			if s := strings.TrimSpace(p.Stderr()); s != "" {
				parts = append(parts, "its stderr: "+clipTail(s, 2000))
			}
			return strings.Join(parts, "; ")
		},
	}, nil
}

// CommandLine is the shell command line that runs program with args, each
// quoted so the shell passes it on unchanged (exec: the server is the
// process the sandbox watches).
func CommandLine(program string, args []string) string {
	var b strings.Builder
	b.WriteString("exec ")
	b.WriteString(shellQuote(program))
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(shellQuote(a))
	}
	return b.String()
}

// shellQuote quotes s for sh: inside single quotes everything is literal
// but the single quote itself.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// clipTail keeps the last n bytes of s (at a rune boundary).
func clipTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return "..." + s[i:]
		}
	}
	return "..." + s
}
