package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// testNodes: a node's announcement replaces its previous one, the list has
// every node by id, and an invalid row is refused.
func testNodes(t *testing.T, h *harness) {
	list, err := h.s.NodeList(h.ctx)
	require.NoError(t, err)
	require.Empty(t, list)

	require.NoError(t, h.s.NodeAnnounce(h.ctx, &store.NodeRow{ID: "node-b", Addrs: []string{"[::]:8080"}, AnnouncedAt: at(time.Second)}))
	require.NoError(t, h.s.NodeAnnounce(h.ctx, &store.NodeRow{ID: "node-a", Addrs: []string{"127.0.0.1:8080", "10.0.0.4:8080"}, AnnouncedAt: at(2 * time.Second)}))
	require.NoError(t, h.s.NodeAnnounce(h.ctx, &store.NodeRow{ID: "node-b", Addrs: []string{"10.0.0.5:9090"}, AnnouncedAt: at(3 * time.Second)}))
	require.NoError(t, h.s.NodeAnnounce(h.ctx, &store.NodeRow{ID: "node-c", AnnouncedAt: at(4 * time.Second)}))

	list, err = h.s.NodeList(h.ctx)
	require.NoError(t, err)
	require.Equal(t, []*store.NodeRow{
		{ID: "node-a", Addrs: []string{"127.0.0.1:8080", "10.0.0.4:8080"}, AnnouncedAt: at(2 * time.Second)},
		{ID: "node-b", Addrs: []string{"10.0.0.5:9090"}, AnnouncedAt: at(3 * time.Second)},
		{ID: "node-c", Addrs: []string{}, AnnouncedAt: at(4 * time.Second)},
	}, list)

	for _, bad := range []*store.NodeRow{
		nil,
		{ID: "", AnnouncedAt: at(0)},
		{ID: "node-d", Addrs: []string{""}, AnnouncedAt: at(0)},
		{ID: "node-d", Addrs: make([]string, 17), AnnouncedAt: at(0)},
		{ID: "node-d"},
	} {
		require.Error(t, h.s.NodeAnnounce(h.ctx, bad))
	}
}
