package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestHubKeepsTheHighestPendingSeq: notices may arrive out of order (on
// PostgreSQL), and a watcher takes what it receives as the highest seq
// announced, so a lower seq heard later must not replace a higher one.
func TestHubKeepsTheHighestPendingSeq(t *testing.T) {
	h := newHub(nil)
	grew, stop := h.watch("s1")
	defer stop()
	h.publish("s1", SessionGrowth{Seq: 5})
	h.publish("s1", SessionGrowth{Seq: 3})
	require.Equal(t, int64(5), <-grew)
	h.publish("s1", SessionGrowth{Seq: 3})
	h.publish("s1", SessionGrowth{Seq: 7})
	require.Equal(t, int64(7), <-grew)
	select {
	case seq := <-grew:
		t.Fatalf("one pending seq at most, got another: %d", seq)
	default:
	}
}

// TestHubKeepsTheNewestPendingStatus: a watcher of statuses gets, of the
// notices pending, the highest seq's status; of one seq said twice (an
// append without events), the later one's when both said it, none (read
// the session) when one came without it, from another node, whose commit
// may have come before or after.
func TestHubKeepsTheNewestPendingStatus(t *testing.T) {
	h := newHub(nil)
	grew, stop := h.watchGrowth("s1")
	defer stop()
	seqs, stopSeqs := h.watch("s1")
	defer stopSeqs()
	for _, tc := range []struct {
		name      string
		published []SessionGrowth
		want      SessionGrowth
	}{
		{"one", []SessionGrowth{{Seq: 2, Status: lt.SessionRunning}}, SessionGrowth{Seq: 2, Status: lt.SessionRunning}},
		{"higher seq last", []SessionGrowth{{Seq: 3, Status: lt.SessionRunning}, {Seq: 4, Status: lt.SessionIdle}},
			SessionGrowth{Seq: 4, Status: lt.SessionIdle}},
		{"higher seq first", []SessionGrowth{{Seq: 6, Status: lt.SessionIdle}, {Seq: 5, Status: lt.SessionRunning}},
			SessionGrowth{Seq: 6, Status: lt.SessionIdle}},
		{"same seq, both known", []SessionGrowth{{Seq: 7, Status: lt.SessionRunning}, {Seq: 7, Status: lt.SessionIdle}},
			SessionGrowth{Seq: 7, Status: lt.SessionIdle}},
		{"same seq, the later unknown", []SessionGrowth{{Seq: 8, Status: lt.SessionIdle}, {Seq: 8}}, SessionGrowth{Seq: 8}},
		{"same seq, the earlier unknown", []SessionGrowth{{Seq: 9}, {Seq: 9, Status: lt.SessionIdle}}, SessionGrowth{Seq: 9}},
		{"same seq, same status", []SessionGrowth{{Seq: 10, Status: lt.SessionIdle}, {Seq: 10, Status: lt.SessionIdle}},
			SessionGrowth{Seq: 10, Status: lt.SessionIdle}},
	} {
		for _, g := range tc.published {
			h.publish("s1", g)
		}
		require.Equal(t, tc.want, <-grew, tc.name)
		require.Equal(t, tc.want.Seq, <-seqs, tc.name)
		select {
		case g := <-grew:
			t.Fatalf("%s: one pending notice at most, got another: %+v", tc.name, g)
		default:
		}
	}
}
