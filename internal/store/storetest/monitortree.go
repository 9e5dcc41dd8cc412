package storetest

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// testMonitorTree: a tree's monitor record is created once, then replaced
// only by a writer that read its current version.
func testMonitorTree(t *testing.T, h *harness) {
	_, err := h.s.MonitorTreeGet(h.ctx, "ses_root")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, h.s.MonitorTreePut(h.ctx, &store.MonitorTreePutParams{RootID: "ses_root", State: []byte(`{"a":1}`)}))
	err = h.s.MonitorTreePut(h.ctx, &store.MonitorTreePutParams{RootID: "ses_root", State: []byte(`{"b":1}`)})
	require.ErrorIs(t, err, store.ErrConflict, "created by another writer")
	row, err := h.s.MonitorTreeGet(h.ctx, "ses_root")
	require.NoError(t, err)
	require.Equal(t, int64(1), row.Version)
	require.JSONEq(t, `{"a":1}`, string(row.State))
	require.NoError(t, h.s.MonitorTreePut(h.ctx, &store.MonitorTreePutParams{RootID: "ses_root", State: []byte(`{"a":2}`), Version: 1}))
	err = h.s.MonitorTreePut(h.ctx, &store.MonitorTreePutParams{RootID: "ses_root", State: []byte(`{"a":3}`), Version: 1})
	require.ErrorIs(t, err, store.ErrConflict, "a stale version")
	row, err = h.s.MonitorTreeGet(h.ctx, "ses_root")
	require.NoError(t, err)
	require.Equal(t, int64(2), row.Version)
	require.JSONEq(t, `{"a":2}`, string(row.State))
	_, err = h.s.MonitorTreeGet(h.ctx, "ses_other")
	require.ErrorIs(t, err, store.ErrNotFound, "one record per tree")
	require.Error(t, h.s.MonitorTreePut(h.ctx, &store.MonitorTreePutParams{RootID: ""}))
}

// testMonitorTreeConcurrent: writers that read, change and put the record
// at once, retrying on a conflict, lose no one's change.
func testMonitorTreeConcurrent(t *testing.T, h *harness) {
	const writers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				for {
					var state string
					var version int64
					row, err := h.s.MonitorTreeGet(h.ctx, "ses_tree")
					switch {
					case err == nil:
						state, version = string(row.State), row.Version
					case !errors.Is(err, store.ErrNotFound):
						errs <- err
						return
					}
					state += "w" + strconv.Itoa(w) + "." + strconv.Itoa(i) + ";"
					err = h.s.MonitorTreePut(h.ctx, &store.MonitorTreePutParams{RootID: "ses_tree", State: []byte(state), Version: version})
					if err == nil {
						break
					}
					if !errors.Is(err, store.ErrConflict) {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	row, err := h.s.MonitorTreeGet(h.ctx, "ses_tree")
	require.NoError(t, err)
	require.Equal(t, int64(writers*each), row.Version)
	require.Len(t, strings.Split(strings.TrimSuffix(string(row.State), ";"), ";"), writers*each, "every change kept")
}
