package scripted

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// FuzzParse checks that Parse never panics, refuses only with a FieldError
// naming a path under "script", and that a script it accepts re-marshals into
// one it parses to the same steps; and that every position of an accepted
// script (and the one past its end) answers the same way twice. The seed
// corpus is in testdata/fuzz/FuzzParse; `go test` runs only the seeds, and
// `go test -fuzz=FuzzParse` explores from them.
func FuzzParse(f *testing.F) {
	p := New(&Config{After: func(time.Duration) <-chan time.Time {
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}})
	f.Fuzz(func(t *testing.T, script []byte) {
		steps, err := Parse(script)
		if err != nil {
			require.Nil(t, steps)
			var fe *model.FieldError
			require.ErrorAs(t, err, &fe)
			require.True(t, strings.HasPrefix(fe.Field, "script"), "field %q", fe.Field)
			require.NotEmpty(t, fe.Message)
			return
		}
		require.NotEmpty(t, steps)

		b, err := json.Marshal(steps)
		require.NoError(t, err)
		again, err := Parse(b)
		require.NoError(t, err, "re-parse %s", b)
		require.Equal(t, steps, again)

		for position := range len(steps) + 1 {
			req := &model.Request{
				Spec:     lt.ModelSpec{Provider: "scripted", Script: script},
				Messages: []model.Message{{Role: model.RoleUser, Text: "go"}},
				Position: position,
			}
			first, firstErr := p.Respond(context.Background(), req)
			second, secondErr := p.Respond(context.Background(), req)
			require.Equal(t, first, second)
			require.Equal(t, firstErr, secondErr)
			if firstErr != nil {
				me, ok := model.AsError(firstErr)
				require.True(t, ok, "position %d: %v", position, firstErr)
				require.NotNil(t, steps[position].Error, "position %d failed without an error step", position)
				require.Equal(t, steps[position].Error.Status, me.Status)
				continue
			}
			// Counts are the step's own (which may be 0) or estimates (at least 1).
			require.GreaterOrEqual(t, first.Usage.InputTokens, int64(0))
			require.GreaterOrEqual(t, first.Usage.OutputTokens, int64(0))
			require.LessOrEqual(t, first.Usage.CachedInputTokens, first.Usage.InputTokens)
			require.LessOrEqual(t, first.Usage.ReasoningTokens, first.Usage.OutputTokens)
			// Without pricing, only a step's own cost is reported.
			wantCost := 0.0
			if position < len(steps) && steps[position].CostUSD != nil {
				wantCost = *steps[position].CostUSD
			}
			require.Equal(t, wantCost, first.CostUSD)
		}
	})
}
