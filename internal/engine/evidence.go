package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/redact"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// What an approval shows of the workspace, so that a person can decide
// from the action alone: the scripts a command runs, the change a write
// makes. Everything shown passes the vault's redactor before it is cut to
// size (a secret cut in half would escape it), and is bounded, with a note
// when cut.
const (
	// maxEvidenceFileBytes bounds one file's contents (or diff) shown.
	maxEvidenceFileBytes = 8 << 10
	// maxEvidenceFiles bounds the scripts shown for one command.
	maxEvidenceFiles = 3
	// maxCountedFiles bounds the walk that counts the workspace's files.
	maxCountedFiles = 10000
)

// approvalContext is what the consequence sentence and the evidence are
// built from: the session's environment and workspace.
type approvalContext struct {
	ctx context.Context
	r   *runner
	red *redact.Redactor
}

// onRunner returns the session's Environment when it lives on a runner:
// the workspace is read there, never in the server's copy (no one's).
func (ac *approvalContext) onRunner() environment.Environment {
	if ac.r.envRunner == "" || ac.r.env == nil {
		return nil
	}
	return ac.r.env.env
}

// evidenceReader reads a regular workspace file for the evidence:
// readBounded's bytes and size.
type evidenceReader func(p string) ([]byte, int64, error)

// reader opens the workspace for the evidence (ok false: there is none
// yet); call done after.
func (ac *approvalContext) reader() (read evidenceReader, done func(), ok bool) {
	if env := ac.onRunner(); env != nil {
		return func(p string) ([]byte, int64, error) {
			r, err := env.ReadFile(ac.ctx, path.Clean(p), 0, 4*maxEvidenceFileBytes)
			if err != nil {
				return nil, 0, err
			}
			return r.Data, r.Size, nil
		}, func() {}, true
	}
	root, err := os.OpenRoot(ac.r.ws)
	if err != nil {
		return nil, nil, false // no workspace yet: nothing in it to show
	}
	return func(p string) ([]byte, int64, error) { return readBounded(root, p) }, func() { root.Close() }, true
}

// fileEvidence shows what a call will run or change in the workspace: the
// scripts a shell command names, the diff a write or an edit makes.
func (ac *approvalContext) fileEvidence(c *journal.Call) []string {
	if c.Kind != lt.CallBuiltin {
		return nil
	}
	read, done, ok := ac.reader()
	if !ok {
		return nil
	}
	defer done()
	switch c.Tool {
	case "shell":
		var args struct {
			Command string `json:"command"`
		}
		_ = json.Unmarshal(c.Arguments, &args)
		var out []string
		for _, p := range scriptFiles(args.Command) {
			data, size, err := read(p)
			if err != nil {
				continue // not a workspace file: an installed program, or not there yet
			}
			if len(out) == maxEvidenceFiles {
				out = append(out, "(more script files are named; only the first few are shown)")
				break
			}
			out = append(out, ac.contents(fmt.Sprintf("The workspace file %s, which the command runs", p), data, size))
		}
		return out
	case "write_file":
		var args struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}
		_ = json.Unmarshal(c.Arguments, &args)
		return []string{ac.change(read, args.Path, func(string) (string, error) { return args.Content, nil })}
	case "edit_file":
		var args struct {
			Path string `json:"path"`
			Old  string `json:"old"`
			New  string `json:"new"`
		}
		_ = json.Unmarshal(c.Arguments, &args)
		return []string{ac.change(read, args.Path, func(old string) (string, error) {
			if n := strings.Count(old, args.Old); args.Old == "" || n != 1 {
				return "", fmt.Errorf("the text to replace occurs %d times in %s (it must occur once): the edit will fail", n, args.Path)
			}
			return strings.Replace(old, args.Old, args.New, 1), nil
		})}
	}
	return nil
}

// change shows the diff between a workspace file now and after the call
// (after computes the new content from the old).
func (ac *approvalContext) change(read evidenceReader, p string, after func(old string) (string, error)) string {
	data, size, err := read(p)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("The workspace file %s could not be read to show the change: %v", p, err)
	}
	if exists && size > int64(len(data)) {
		return fmt.Sprintf("The workspace file %s is %d bytes, too large to show the change", p, size)
	}
	if exists && !utf8.Valid(data) {
		return fmt.Sprintf("The workspace file %s is binary (%d bytes): the change is not shown", p, size)
	}
	next, err := after(string(data))
	if err != nil {
		return upperFirst(err.Error())
	}
	if !exists {
		return ac.contents(fmt.Sprintf("A new workspace file %s", p), []byte(next), int64(len(next)))
	}
	old, now := ac.red.String(string(data)), ac.red.String(next)
	if old == now {
		return fmt.Sprintf("The workspace file %s already holds exactly this: no change", p)
	}
	diff := lineDiff(p, old, now)
	note := ""
	if len(diff) > maxEvidenceFileBytes {
		diff, note = clip(diff, maxEvidenceFileBytes), fmt.Sprintf("\n(cut: the diff is %d bytes; the first %d are shown)", len(diff), maxEvidenceFileBytes)
	}
	return fmt.Sprintf("The change to the workspace file %s (a diff against the file now):\n%s%s", p, diff, note)
}

// contents shows a file's text, redacted then bounded.
func (ac *approvalContext) contents(what string, data []byte, size int64) string {
	if !utf8.Valid(data) || strings.IndexByte(string(data), 0) >= 0 {
		return fmt.Sprintf("%s is binary (%d bytes): not shown", what, size)
	}
	text := ac.red.String(string(data))
	note := ""
	if len(text) > maxEvidenceFileBytes || size > int64(len(data)) {
		text = clip(text, maxEvidenceFileBytes)
		note = fmt.Sprintf("\n(cut: the file is %d bytes; the first %d are shown)", size, maxEvidenceFileBytes)
	}
	return fmt.Sprintf("%s (%d bytes):\n%s%s", what, size, text, note)
}

// readBounded reads a regular workspace file, at most a few times what is
// shown (enough to redact what is shown whole), and returns its size.
func readBounded(root *os.Root, p string) ([]byte, int64, error) {
	f, err := root.OpenFile(path.Clean(p), evidenceReadFlags, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, 4*maxEvidenceFileBytes))
	return data, st.Size(), err
}

// interpreters are programs whose first operand is a script they run.
var interpreters = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "python": true, "python3": true,
	"node": true, "deno": true, "bun": true, "ruby": true, "perl": true, "php": true, "Rscript": true,
	"lua": true, "tclsh": true, "source": true, ".": true,
}

// scriptFiles are the workspace-relative files a shell command runs: the
// script given to an interpreter (sh stats.sh, python3 -u job.py), or a
// program named by a relative path (./build.sh, tools/run). It reads the
// command as a person would, not as the shell does: what it misses is
// only not shown.
func scriptFiles(command string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		p = strings.Trim(p, `"'`)
		if p == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") || strings.HasPrefix(p, "$") {
			return
		}
		if c := path.Clean(p); !seen[c] && c != "." && !strings.HasPrefix(c, "../") {
			seen[c] = true
			out = append(out, c)
		}
	}
	for _, simple := range splitCommands(command) {
		words := strings.Fields(simple)
		// Skip leading variable assignments and wrappers: FOO=1 env time sh x.
		for len(words) > 0 && (strings.Contains(words[0], "=") || words[0] == "env" || words[0] == "time" || words[0] == "exec" || words[0] == "nice") {
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		prog := path.Base(words[0])
		switch {
		case interpreters[prog] || interpreters[words[0]]:
			for i := 1; i < len(words); i++ {
				w := words[i]
				if w == "-c" || w == "-e" || w == "-m" || w == "--eval" {
					break // inline code or a module: no script file
				}
				if strings.HasPrefix(w, "-") || w == "run" {
					continue
				}
				add(w)
				break
			}
		case strings.Contains(words[0], "/"):
			add(words[0])
		}
	}
	return out
}

// splitCommands cuts a command line into its simple commands at ; & | and
// newlines.
func splitCommands(command string) []string {
	return strings.FieldsFunc(command, func(r rune) bool {
		return r == ';' || r == '&' || r == '|' || r == '\n' || r == '(' || r == ')'
	})
}
