package sqlite

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// TestActionListAllUsesIndexes: the inbox filters must not scan every
// action ever created; each filter has an index with the list's order.
func TestActionListAllUsesIndexes(t *testing.T) {
	s := openMigrated(t, nil)
	after := &store.DocCursor{CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), ID: "act_1"}
	tests := []struct {
		name  string
		p     store.ActionListParams
		index string
	}{
		{"status", store.ActionListParams{Status: "pending", After: after}, "actions_status"},
		{"type", store.ActionListParams{Type: "approval", After: after}, "actions_type"},
		{"session", store.ActionListParams{SessionID: "ses_1", After: after}, "actions_session"},
	}
	for _, tt := range tests {
		q, args, err := actionListQuery(&tt.p, 10)
		require.NoError(t, err)
		joined := strings.Join(queryPlan(t, s, q, args...), "\n")
		require.Contains(t, joined, tt.index, "%s: %s", tt.name, joined)
		require.NotContains(t, joined, "TEMP B-TREE", "%s: the index gives the order: %s", tt.name, joined)
	}
}
