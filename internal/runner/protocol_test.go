package runner_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/runner"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
)

// TestRunnerSaysItsProtocol: a runner says the protocol this build speaks
// in its Hello (its configuration need not), and the hub records it with
// the connection, listed by every node.
func TestRunnerSaysItsProtocol(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	start(t, s, "box1", "good")
	r := connected(t, s, "box1")
	require.Equal(t, link.ProtocolVersion, r.Row.Protocol)
	rows, err := s.store.RunnerList(t.Context(), "default", 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, link.ProtocolVersion, rows[0].Protocol)
}

// TestOutdatedRunnerStops: a server that needs a newer protocol than the
// runner speaks refuses it before recording anything (link.StatusOutdated),
// and the runner stops for good (ErrRefused), saying to upgrade it rather
// than trying again and again: only a new build helps. A runner from
// before versions (protocol 1) is refused by a server of this build.
func TestOutdatedRunnerStops(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		min, speaks int
	}{
		"the server needs a newer protocol": {min: link.ProtocolVersion + 1},
		"a runner from before versions":     {speaks: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(hc *hub.Config) { hc.MinProtocol = c.min })
			var connects atomic.Int32
			errc, _ := start(t, s, "box1", "good", func(rc *runner.Config) {
				rc.Hello.Protocol = c.speaks
				rc.OnConnect = func(link.Welcome) { connects.Add(1) }
			})
			var err error
			select {
			case err = <-errc:
			case <-time.After(10 * time.Second):
				t.Fatal("the outdated runner kept trying")
			}
			require.True(t, errors.Is(err, runner.ErrRefused), "%v", err)
			require.ErrorContains(t, err, "upgrade longhaul on this machine")
			require.ErrorContains(t, err, "the oldest this server takes")
			require.Zero(t, connects.Load(), "never welcomed")
			rows, lerr := s.store.RunnerList(t.Context(), "", 0)
			require.NoError(t, lerr)
			require.Empty(t, rows, "nothing recorded")
		})
	}
}

// TestHelloProtocolChecked: a Hello's protocol is absent (1), or 1 to
// MaxProtocolVersion; anything else is refused naming the field.
func TestHelloProtocolChecked(t *testing.T) {
	t.Parallel()
	h := link.Hello{Name: "box1", Capacity: 1}
	require.NoError(t, h.Check())
	require.Equal(t, 1, h.EffectiveProtocol(), "none said: a runner from before versions")
	h.Protocol = link.ProtocolVersion + 5
	require.NoError(t, h.Check(), "a newer runner answers every older call")
	require.Equal(t, link.ProtocolVersion+5, h.EffectiveProtocol())
	for _, p := range []int{-1, link.MaxProtocolVersion + 1} {
		h.Protocol = p
		require.ErrorContains(t, h.Check(), "hello.protocol")
	}
}
