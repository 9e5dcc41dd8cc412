package storeutil

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// A write's events are numbered after the seq it expects and carry their
// time as stored; its docs are bound to the session.
func TestPrepareEventAppend(t *testing.T) {
	p := validAppend()
	p.ExpectedSeq = 4
	p.Events = append(p.Events, store.NewEvent{Type: "f", Time: testTime.Add(1500 * time.Nanosecond).In(time.FixedZone("x", 3600))})
	p.Docs = []store.DocWrite{{Kind: store.DocTurn, ID: "t1", CreatedAt: testTime}}
	w, err := lenient.PrepareEventAppend(p)
	require.NoError(t, err)
	require.Equal(t, int64(6), w.LastSeq)
	require.Equal(t, []int64{5, 6}, []int64{w.Events[0].Seq, w.Events[1].Seq})
	require.Equal(t, "ses_1", w.Events[1].SessionID)
	require.Equal(t, testTime.Add(time.Microsecond), w.Events[1].Time, "microseconds, in UTC")
	require.Equal(t, "ses_1", w.Docs[0].SessionID)

	p.Docs[0].SessionID = "ses_2"
	_, err = lenient.PrepareEventAppend(p)
	require.EqualError(t, err, `append events to session ses_1: docs[0].session_id "ses_2" is not the written session "ses_1"`)
	_, err = lenient.PrepareEventAppend(nil)
	require.EqualError(t, err, "append events: params are nil")
}

func TestPrepareSessionCreate(t *testing.T) {
	p := &store.SessionCreateParams{
		Session: store.SessionRow{ID: "ses_1", AgentName: "a", AgentVersion: 1, Status: "running", CreatedAt: testTime},
		Events:  []store.NewEvent{{Type: "e", Time: testTime}},
	}
	sess, w, err := lenient.PrepareSessionCreate(p)
	require.NoError(t, err)
	require.Equal(t, testTime, sess.UpdatedAt, "a zero UpdatedAt is CreatedAt")
	require.Equal(t, store.DefaultProject, sess.Project, "no project: the default one")
	require.Equal(t, int64(1), w.LastSeq)
	require.Equal(t, int64(1), w.Events[0].Seq)

	_, _, err = lenient.PrepareSessionCreate(nil)
	require.EqualError(t, err, "create session: params are nil")
	p.Session.AgentName = ""
	_, _, err = lenient.PrepareSessionCreate(p)
	require.EqualError(t, err, "create session: session.agent_name is empty")
}
