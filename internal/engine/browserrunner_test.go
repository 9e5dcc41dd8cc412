package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestBrowserOnARunnerIsRefused: a session whose environment lives on a
// remote runner gets a clear error from every browser action (a login
// included, before any secret is looked up), and the turn goes on: the
// runner's side of starting a browser does not exist yet.
func TestBrowserOnARunnerIsRefused(t *testing.T) {
	h, rb := newRunnerHarness(t)
	h.restart("node-a")
	rb.connected.Store(true)
	sp := onGPU(spec(t, `[
	  {"tool_calls":[{"name":"browser","arguments":{"action":"open","url":"https://shop.example/"}}]},
	  {"tool_calls":[{"name":"browser","arguments":{"action":"login","url":"https://shop.example/login","secret":"SHOP_LOGIN"}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "browser"}))
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	var failures []string
	for _, ev := range events(t, h, s.ID, lt.EventToolFailed) {
		failures = append(failures, data[lt.ToolFailedData](t, ev).Error)
	}
	require.Len(t, failures, 2, "both browser calls failed")
	for _, f := range failures {
		require.Contains(t, f, "the browser cannot run in an environment on a remote runner yet")
	}
	require.Empty(t, events(t, h, s.ID, lt.EventToolCompleted))
}
