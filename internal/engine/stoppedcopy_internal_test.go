package engine

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestStoppedCopyAsTheWholeState: copyIsStale's partial decode of a
// session's state answers what the whole state decoded answers, and
// refuses a state that is not the journal's last, as loadState does.
func TestStoppedCopyAsTheWholeState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		workspace string
		stopped   bool
	}{
		{"running root", "", false},
		{"stopped root", "", true},
		{"sub-agent in its root's workspace, stopped", "ses_root", true},
		{"sub-agent, running", "ses_root", false},
	} {
		st := journal.State{Session: lt.Session{ID: "ses_a", LastEventSeq: 7, Status: lt.SessionIdle}, Workspace: tc.workspace, EnvironmentStopped: tc.stopped}
		raw, err := json.Marshal(&st)
		require.NoError(t, err)
		for _, id := range []string{"ses_a", "ses_root", "ses_other"} {
			row := &store.SessionRow{ID: "ses_a", State: raw, LastSeq: 7}
			got, err := stoppedCopy(row, id)
			require.NoError(t, err, tc.name)
			var whole journal.State
			require.NoError(t, json.Unmarshal(raw, &whole))
			require.Equal(t, whole.EnvironmentStopped && whole.WorkspaceID() == id, got, "%s, copy %s", tc.name, id)
		}
		_, err = stoppedCopy(&store.SessionRow{ID: "ses_a", State: raw, LastSeq: 8}, "ses_a")
		require.ErrorContains(t, err, "state at seq 7 but journal at 8")
	}
}
