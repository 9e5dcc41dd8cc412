package sqlite

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/freespace/freespacetest"
	"github.com/longhaul-dev/longhaul/internal/store"
)

// TestFullDiskIsErrStorageFull fills the volume under a real database:
// writes fail with store.ErrStorageFull (not an anonymous I/O error), what
// was acknowledged before stays, and writes work again once space is
// freed, on the same open store.
func TestFullDiskIsErrStorageFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := freespacetest.MountTmpfs(t, 8)
	s := openPath(t, filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(t, s.Migrate(ctx))
	createSession(t, s, "ses_full", true)
	seq := int64(1)

	ballast := freespacetest.Fill(t, dir, 0)
	// Pages freed in the WAL may still take a few small events; big ones
	// need new pages soon.
	big := `{"pad":"` + strings.Repeat("x", 256<<10) + `"}`
	var err error
	for range 64 {
		p := appendParams("ses_full", seq, 1)
		p.Events[0].Data = json.RawMessage(big)
		if _, err = s.EventAppend(ctx, p); err != nil {
			break
		}
		seq++
	}
	require.Error(t, err, "64 appends of 256 KiB fit on a full 8 MiB volume")
	require.ErrorIs(t, err, store.ErrStorageFull)
	// A session created now fails the same way, and is not half there.
	_, err = s.SessionCreate(ctx, &store.SessionCreateParams{
		Session: store.SessionRow{ID: "ses_late", AgentName: "agent", AgentVersion: 1, Status: "queued", CreatedAt: testTime, UpdatedAt: testTime},
		Events:  []store.NewEvent{{Type: "session.created", Time: testTime, Data: json.RawMessage(big)}},
	})
	require.ErrorIs(t, err, store.ErrStorageFull)
	_, err = s.SessionGet(ctx, "ses_late")
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, os.Remove(ballast))
	_, err = s.EventAppend(ctx, appendParams("ses_full", seq, 1))
	require.NoError(t, err, "append after space returned")
	evs, err := s.EventList(ctx, "ses_full", 0, 1000)
	require.NoError(t, err)
	require.Len(t, evs, int(seq)+1, "every acknowledged event is there, and nothing else")
	for i, e := range evs {
		require.Equal(t, int64(i+1), e.Seq)
	}
}
