package monitor

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// tree is a session tree's record, as the store would hold it, and the
// findings each session's ApplyTree returned.
type tree struct {
	t      *testing.T
	raw    []byte
	byName map[string][]Finding
}

// sync applies j's pending contributions, as session, to the record.
func (tr *tree) sync(session string, j *journal) []Finding {
	tr.t.Helper()
	raw, n, found, err := j.m.ApplyTree(tr.raw, session)
	require.NoError(tr.t, err)
	tr.raw = raw
	j.m.TreeApplied(n)
	if tr.byName == nil {
		tr.byName = map[string][]Finding{}
	}
	tr.byName[session] = append(tr.byName[session], found...)
	return found
}

func treeJournal(t *testing.T, secrets *SecretIndex) *journal {
	return newJournal(t, Config{Secrets: secrets, Tree: true})
}

// TestTreeSecretFragmentsJoined: two sessions of a tree each send less
// than half of a vault value toward a host; neither finds it alone, the
// tree does, once, in the session whose call completed it, with the other
// session's call as tree evidence. A replay adds nothing.
func TestTreeSecretFragmentsJoined(t *testing.T) {
	t.Parallel()
	secret := "s3cr3t-vault-value-0123456789abcdef"
	x := NewSecretIndex(map[string]string{"DB_PASSWORD": secret})
	tr := &tree{t: t}
	a, b := treeJournal(t, x), treeJournal(t, x)
	sa := a.call("http_request", map[string]any{"url": "http://127.0.0.1:9/p?part=" + secret[:12]}, "200", "")
	require.Empty(t, tr.sync("ses_a", a))
	benign(b, 3)
	sb := b.call("http_request", map[string]any{"url": "http://127.0.0.1:9/p", "body": "part " + secret[12:24]}, "200", "")
	require.Empty(t, a.findings, "under half of it in each session")
	require.Empty(t, b.findings)
	got := tr.sync("ses_b", b)
	require.Len(t, got, 1)
	f := got[0]
	require.Equal(t, SecretLikeEgress, f.Detector)
	require.Equal(t, []int64{sb}, f.Evidence)
	require.Equal(t, []lt.MonitorEvidence{{SessionID: "ses_a", Seq: sa}}, f.TreeEvidence)
	require.Contains(t, f.Summary, "DB_PASSWORD")
	require.Contains(t, f.Summary, "2 sessions of the tree")
	for i := 0; i+6 <= len(secret); i++ {
		require.NotContains(t, string(tr.raw), secret[i:i+6], "the record holds positions, never bytes")
	}
	// A replay of either session (a crash before the finding was
	// journaled): the one that made it finds it again, the other nothing.
	a.m.Reset()
	a.seq, a.step = 0, 0
	a.call("http_request", map[string]any{"url": "http://127.0.0.1:9/p?part=" + secret[:12]}, "200", "")
	require.Empty(t, tr.sync("ses_a", a))
	b.m.Reset()
	b.seq, b.step = 0, 0
	benign(b, 3)
	b.call("http_request", map[string]any{"url": "http://127.0.0.1:9/p", "body": "part " + secret[12:24]}, "200", "")
	again := tr.sync("ses_b", b)
	require.Equal(t, got, again, "the reporter's replay returns the same finding")
	// Journaled once, it is not journaled again.
	b.add(lt.EventMonitorFinding, f.MonitorFindingData)
	require.True(t, b.m.Journaled(&again[0]))
	// Spent: the fragments joined are not joined again with a third
	// session's.
	c := treeJournal(t, x)
	c.call("http_request", map[string]any{"url": "http://127.0.0.1:9/p?part=" + secret[:12]}, "200", "")
	require.Empty(t, tr.sync("ses_c", c))
}

// TestTreeSessionAloneIsItsOwnFinding: a session that sends half of a value
// alone finds it itself; the tree does not count those fragments again.
func TestTreeSessionAloneIsItsOwnFinding(t *testing.T) {
	t.Parallel()
	secret := "s3cr3t-vault-value-0123456789abcdef"
	x := NewSecretIndex(map[string]string{"DB_PASSWORD": secret})
	tr := &tree{t: t}
	a, b := treeJournal(t, x), treeJournal(t, x)
	a.call("http_request", map[string]any{"url": "http://127.0.0.1:9/p?part=" + secret[:20]}, "200", "")
	require.Len(t, a.of(SecretLikeEgress), 1)
	require.Empty(t, tr.sync("ses_a", a))
	b.call("http_request", map[string]any{"url": "http://127.0.0.1:9/p?part=" + secret[20:26]}, "200", "")
	require.Empty(t, tr.sync("ses_b", b), "a's fragments were its own finding")
}

// TestTreeRefusedConnectionsAndProbes: refused connections and probes for
// secrets split between sessions, too few in each, add up in the tree.
func TestTreeRefusedConnectionsAndProbes(t *testing.T) {
	t.Parallel()
	tr := &tree{t: t}
	a, b := treeJournal(t, nil), treeJournal(t, nil)
	refuse := func(j *journal, host string) int64 {
		j.step++
		id := fmt.Sprint("c", j.step)
		j.add(lt.EventToolRequested, lt.ToolRequestedData{Step: j.step, CallID: id, Tool: "shell", Arguments: []byte(`{"command":"true"}`)})
		return j.add(lt.EventNetworkConnection, lt.NetworkConnectionData{Step: j.step, CallID: id, Tool: "shell", Via: "proxy", Host: host, Port: 80, Reason: "not allowed"})
	}
	r1 := refuse(a, "10.0.0.1")
	r2 := refuse(a, "10.0.0.2")
	require.Empty(t, tr.sync("ses_a", a))
	r3 := refuse(b, "169.254.169.254")
	require.Empty(t, a.findings)
	require.Empty(t, b.findings)
	got := tr.sync("ses_b", b)
	require.Len(t, got, 1)
	require.Equal(t, RefusedConnections, got[0].Detector)
	require.Equal(t, []int64{r3}, got[0].Evidence)
	require.Equal(t, []lt.MonitorEvidence{{SessionID: "ses_a", Seq: r1}, {SessionID: "ses_a", Seq: r2}}, got[0].TreeEvidence)

	// Probes: one in each of three sessions.
	c := treeJournal(t, nil)
	a.shell("cat /proc/self/environ")
	b.shell("printenv")
	require.Empty(t, tr.sync("ses_a", a))
	require.Empty(t, tr.sync("ses_b", b))
	c.shell("cat ~/.netrc")
	got = tr.sync("ses_c", c)
	require.Len(t, got, 1)
	require.Equal(t, SecretProbe, got[0].Detector)
	require.Equal(t, High, got[0].Severity)
	require.Contains(t, got[0].Summary, "3 probes for secrets by 3 sessions of the tree")
	require.Len(t, got[0].TreeEvidence, 2)
	// Each probe was also its session's own finding, journaled apart.
	require.Len(t, c.of(SecretProbe), 1)
}

// TestNoTreeNoContributions: a session in no tree keeps nothing for one.
func TestNoTreeNoContributions(t *testing.T) {
	t.Parallel()
	j := newJournal(t, Config{})
	j.shell("printenv")
	n, _ := j.m.TreePending()
	require.Zero(t, n)
}
