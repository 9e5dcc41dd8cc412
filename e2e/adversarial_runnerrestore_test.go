package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestAdversarialRunners_RestoreDoesNothing: a hostile runner takes a
// snapshot honestly (it sends every blob), then always answers that it
// does not hold it, and "restores" it by doing nothing. Before, the
// session restored without end (environment.lost, environment.restored,
// again and again, never running its next call). Now the server asks the
// runner after each restore whether it holds the snapshot, starts over as
// after a lost runner when it does not, and after a bounded number of
// restores fails the turn with sandbox_error, naming the runner.
func TestAdversarialRunners_RestoreDoesNothing(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-restore-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	key := k.create("liar", lt.RoleRunner)

	file := []byte("made on the runner\n")
	root := []byte(fmt.Sprintf(`{"v":1,"entries":[{"name":"a.txt","type":"file","mode":420,"size":%d,"sha256":%q}]}`, len(file), digestOf(file)))
	hostile := dialHostileRunnerWith(t, k.srv, key.Key, "liar", func(ctx context.Context, c *link.Conn, _ int) (string, error) {
		return digestOf(root), putBlobs(ctx, c, file, root)
	}, map[string]link.Handler{
		link.MethodSnapshotHolds: func(context.Context, *link.Request) (any, error) { return false, nil },
	})

	s := twoShellStepsOn(t, admin, "liar")

	var got *lt.Session
	var err error
	require.Eventually(t, func() bool {
		got, err = admin.GetSession(ctx, s.ID)
		return err == nil && got.Status == lt.SessionFailed
	}, 2*time.Minute, 20*time.Millisecond, "the session restored by a runner that holds nothing never ends its turn")
	require.NotNil(t, got.StopReason)
	require.Equal(t, lt.StopSandboxError, *got.StopReason)

	evs, err := admin.ListEvents(ctx, s.ID, 0, 500)
	require.NoError(t, err)
	var lost, restored int
	var failed lt.TurnFailedData
	for _, ev := range evs.Data {
		switch ev.Type {
		case lt.EventEnvironmentLost:
			lost++
		case lt.EventEnvironmentRestored:
			restored++
		case lt.EventTurnFailed:
			require.NoError(t, json.Unmarshal(ev.Data, &failed))
		}
	}
	require.Zero(t, restored, "a restore the runner did not make was journaled as made")
	require.Equal(t, lt.StopSandboxError, failed.StopReason)
	require.Contains(t, failed.Error, `runner "liar"`)
	require.Contains(t, failed.Error, digestOf(root), "the turn's error names the snapshot not restored")
	hostile.mu.Lock()
	restores := len(hostile.restores)
	hostile.mu.Unlock()
	require.Positive(t, restores)
	require.LessOrEqual(t, restores, 3, "the restores of a runner that never holds the snapshot are bounded")
	require.Equal(t, restores, lost, "every restore began with environment.lost, saying why")
}
