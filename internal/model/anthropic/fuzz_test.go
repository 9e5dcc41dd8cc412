package anthropic

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// FuzzAccumulate feeds arbitrary event sequences (one JSON event per line) to
// the accumulator: it must never panic, and whatever response it builds must
// be complete: tool inputs valid JSON, reasoning tokens within the output.
func FuzzAccumulate(f *testing.F) {
	names, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var lines []string
		for _, line := range strings.Split(string(b), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				lines = append(lines, data)
			}
		}
		f.Add(strings.Join(lines, "\n"))
	}
	f.Fuzz(func(t *testing.T, stream string) {
		a := &accumulator{onDelta: func(model.Delta) {}}
		for _, line := range strings.Split(stream, "\n") {
			var ev sdk.MessageStreamEventUnion
			if json.Unmarshal([]byte(line), &ev) != nil {
				continue
			}
			if a.handle(ev) != nil {
				return
			}
			if a.stopped {
				break
			}
		}
		resp, err := a.response(lt.ModelSpec{Provider: ProviderName, Name: "claude-sonnet-4-5"})
		if err != nil {
			return
		}
		for _, c := range resp.ToolCalls {
			if !json.Valid(c.Arguments) {
				t.Fatalf("tool call %s has invalid arguments %q", c.Name, c.Arguments)
			}
		}
		if resp.Usage.ReasoningTokens > resp.Usage.OutputTokens {
			t.Fatalf("reasoning tokens %d above output tokens %d", resp.Usage.ReasoningTokens, resp.Usage.OutputTokens)
		}
	})
}
