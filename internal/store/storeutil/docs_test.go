package storeutil

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

func TestNormalizeDocs(t *testing.T) {
	docs, err := NormalizeDocs("ses_1", []store.DocWrite{{ID: "a"}, {ID: "b", SessionID: "ses_1"}})
	require.NoError(t, err)
	require.Equal(t, []store.DocWrite{{ID: "a", SessionID: "ses_1"}, {ID: "b", SessionID: "ses_1"}}, docs)
	_, err = NormalizeDocs("ses_1", []store.DocWrite{{ID: "a", SessionID: "ses_2"}})
	require.EqualError(t, err, `docs[0].session_id "ses_2" is not the written session "ses_1"`)
}

// Projections checks ids before it queries, wraps what the driver returns,
// and tells an empty list from an unknown session.
func TestProjections(t *testing.T) {
	var queried []string
	p := Projections{
		Checks: strict,
		QueryList: func(_ context.Context, kind store.DocKind, sessionID, status string) ([]*store.DocRow, error) {
			queried = append(queried, fmt.Sprintf("list %s %s %q", kind, sessionID, status))
			return nil, nil
		},
		QueryGet: func(_ context.Context, kind store.DocKind, sessionID, id string) (*store.DocRow, error) {
			queried = append(queried, fmt.Sprintf("get %s %q %s", kind, sessionID, id))
			return nil, store.ErrNotFound
		},
		SessionExists: func(_ context.Context, id string) error {
			if id == "ses_gone" {
				return fmt.Errorf("session %s: %w", id, store.ErrNotFound)
			}
			return nil
		},
	}
	ctx := context.Background()

	rows, err := p.ActionList(ctx, "ses_1", "pending")
	require.NoError(t, err)
	require.Empty(t, rows)
	_, err = p.TurnList(ctx, "ses_gone")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.EqualError(t, err, "list turns: session ses_gone: not found")
	_, err = p.ArtifactGet(ctx, "art_1")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.EqualError(t, err, "get artifact art_1: not found")

	_, err = p.TurnGet(ctx, "", "t1")
	require.EqualError(t, err, "get turn: session_id is empty")
	_, err = p.ActionGet(ctx, "ses_1", "")
	require.EqualError(t, err, "get action: id is empty")
	_, err = p.EffectList(ctx, "ses\x00")
	require.EqualError(t, err, "list effects: session_id contains a NUL byte")

	require.Equal(t, []string{`list action ses_1 "pending"`, `list turn ses_gone ""`, `get artifact "" art_1`}, queried,
		"ids that fail their checks reach no query")
}
