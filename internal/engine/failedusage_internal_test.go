package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestFailedUsage: a failed call counts its input (and what it streamed)
// only when the provider worked on it: the call ran into its own timeout,
// or it streamed; an error status, a 408 or a 504 among them (a timeout to
// the provider's way of saying), counts nothing more; a provider's usage
// reported with its error is what counts when there is one.
func TestFailedUsage(t *testing.T) {
	spec := lt.ModelSpec{Provider: "openai", Name: "gpt-4o"}
	counter := model.CounterFor(spec.Provider, spec.Name)
	require.Nil(t, failedUsage(spec, counter, nil, false, 100000, ""), "an error status before any work counts nothing more")
	timedOut := failedUsage(spec, counter, nil, true, 100000, "")
	require.NotNil(t, timedOut)
	require.Equal(t, lt.Usage{InputTokens: 100000, Estimated: true, CostUSD: model.CostOf(spec, lt.Usage{InputTokens: 100000})}, *timedOut)
	broken := failedUsage(spec, counter, nil, false, 1000, "half an answer")
	require.NotNil(t, broken)
	require.Equal(t, int64(1000), broken.InputTokens)
	require.Positive(t, broken.OutputTokens)
	reported := failedUsage(spec, counter, &model.Response{Usage: lt.Usage{InputTokens: 7, OutputTokens: 3}, CostUSD: 0.5}, false, 1000, "")
	require.Equal(t, lt.Usage{InputTokens: 7, OutputTokens: 3, CostUSD: 0.5}, *reported)
}
