package sqlite

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLastSeqFollowsTheWriter: SessionLastSeq answers from the writer's
// table after an append, and from the database again after a raw write
// the table cannot follow.
func TestLastSeqFollowsTheWriter(t *testing.T) {
	s := openMigrated(t, nil)
	createSession(t, s, "ses_a", false) // seq 1, read from the database
	seq, err := s.SessionLastSeq(t.Context(), "ses_a")
	require.NoError(t, err)
	require.Equal(t, int64(1), seq)

	_, err = s.EventAppend(t.Context(), appendParams("ses_a", 1, 2))
	require.NoError(t, err)
	_, known, _ := s.seqs.get("ses_a")
	require.True(t, known, "the append's seq is in the table")
	seq, err = s.SessionLastSeq(t.Context(), "ses_a")
	require.NoError(t, err)
	require.Equal(t, int64(3), seq)

	raw(t, s, func(w *writer) error {
		_, err := w.conn.ExecContext(t.Context(), `UPDATE sessions SET last_seq = 42 WHERE id = 'ses_a'`)
		return err
	})
	seq, err = s.SessionLastSeq(t.Context(), "ses_a")
	require.NoError(t, err)
	require.Equal(t, int64(42), seq, "a raw write empties the table")

	require.NoError(t, s.Close())
	_, err = s.SessionLastSeq(t.Context(), "ses_a")
	require.Error(t, err, "a closed store answers nothing, even from the table")
}

// TestLastSeqsNeverGoBack: a seq read from the database before an append
// committed cannot hide the append, and one read before the table was
// emptied is not kept.
func TestLastSeqsNeverGoBack(t *testing.T) {
	tab := newLastSeqs()
	_, known, epoch := tab.get("ses_a")
	require.False(t, known)
	tab.advance("ses_a", 5) // committed while the read ran
	tab.fill("ses_a", 4, epoch)
	seq, known, _ := tab.get("ses_a")
	require.True(t, known)
	require.Equal(t, int64(5), seq)

	_, _, epoch = tab.get("ses_b")
	tab.forget()
	tab.fill("ses_b", 7, epoch)
	_, known, epoch = tab.get("ses_b")
	require.False(t, known, "read before the table was emptied: not kept")
	tab.fill("ses_b", 7, epoch)
	seq, known, _ = tab.get("ses_b")
	require.True(t, known)
	require.Equal(t, int64(7), seq)

	for i := range maxLastSeqs + 1 {
		tab.advance(fmt.Sprintf("ses_%d", i), 1)
	}
	require.LessOrEqual(t, len(tab.seqs), maxLastSeqs, "the table is bounded")
}
