package journal

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestApplyBrowserPermission: an allowed browser_permission puts its call
// back to run, granting the site to that call (once) or to the session
// (session), from the journal alone; a deny grants nothing.
func TestApplyBrowserPermission(t *testing.T) {
	ask := func(b *builder, id, origin string) {
		b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: lt.Action{
			ID: id, Type: lt.ActionBrowserPermission, TurnID: "t1", Step: 1, CallID: "c1", RequestID: "brq_" + id, Origin: origin,
		}})
		require.Equal(t, CallAwaitingAction, b.st.Step.Calls[0].Status)
		require.False(t, b.st.Runnable(), "the session parks on it")
	}
	allow := func(b *builder, id, scope string) {
		b.must(lt.EventActionResolved, "t1", lt.ActionResolvedData{ActionID: id, Type: string(lt.ActionBrowserPermission), CallID: "c1",
			Decision: lt.Decision{Decision: lt.DecisionAllow, Scope: scope, RequestID: "brq_" + id}})
	}
	b := started(t, lt.EffectRead)
	ask(b, "a1", "http://a.example:80")
	allow(b, "a1", lt.ScopeOnce)
	c := b.st.Step.Calls[0]
	require.Equal(t, CallRequested, c.Status, "allowed: the call runs again")
	require.Equal(t, []string{"http://a.example:80"}, c.BrowserOnce)
	require.Empty(t, b.st.BrowserSites, "once is not the session's")
	require.True(t, b.st.Runnable())

	b.must(lt.EventToolStarted, "t1", lt.ToolStartedData{Step: 1, Index: 0, CallID: "c1", EffectID: "e1", Class: lt.EffectRead, Attempt: 2})
	ask(b, "a2", "http://b.example:80")
	allow(b, "a2", lt.ScopeSession)
	require.Equal(t, []string{"http://b.example:80"}, b.st.BrowserSites)
	require.Equal(t, []string{"http://a.example:80"}, b.st.Step.Calls[0].BrowserOnce, "the call keeps its once grant")

	// Denied: the grant lists do not change.
	b.must(lt.EventToolStarted, "t1", lt.ToolStartedData{Step: 1, Index: 0, CallID: "c1", EffectID: "e1", Class: lt.EffectRead, Attempt: 3})
	ask(b, "a3", "http://c.example:80")
	b.must(lt.EventActionResolved, "t1", lt.ActionResolvedData{ActionID: "a3", Type: string(lt.ActionBrowserPermission), CallID: "c1",
		Decision: lt.Decision{Decision: lt.DecisionDeny, Reason: "no", RequestID: "brq_a3"}})
	require.Equal(t, []string{"http://b.example:80"}, b.st.BrowserSites)
	require.Equal(t, []string{"http://a.example:80"}, b.st.Step.Calls[0].BrowserOnce)
}
