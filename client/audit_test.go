package client

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestListAudit: the parameters become the query; the page comes back as
// sent; a refusal is an *APIError; a bad limit sends nothing.
func TestListAudit(t *testing.T) {
	t.Parallel()
	next := "7"
	page := lt.List[lt.AuditEntry]{Data: []lt.AuditEntry{{
		Seq: 7, Time: testTime, Actor: &lt.Actor{KeyID: "key_1", Name: "alice", Role: lt.RoleApprover},
		Remote: "192.0.2.1", Method: "POST", Route: "POST /v1/sessions/{id}/actions/{action_id}",
		Targets: map[string]string{"session": "ses_1", "action": "act_1"}, Status: 200, RequestID: "0123456789abcdef",
	}, {
		Seq: 8, Time: testTime, KeyPrefix: "lh_abcdefgh", Method: "GET", Route: "GET /v1/sessions", Status: 401, RequestID: "fedcba9876543210",
	}}, NextCursor: &next}
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			writeJSON(w, http.StatusOK, page)
			return
		}
		writeAPIError(w, http.StatusForbidden, lt.CodeForbidden, "the reader role may not call ListAudit (it needs one of: admin)")
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)

	got, err := c.ListAudit(t.Context(), ListAuditParams{Since: "7d", Actor: "alice", Cursor: "3", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, &page, got)
	_, err = c.ListAudit(t.Context(), ListAuditParams{})
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
	_, err = c.ListAudit(t.Context(), ListAuditParams{Limit: -1})
	require.ErrorContains(t, err, "ListAuditParams.Limit")

	reqs := rc.all()
	require.Len(t, reqs, 2, "a bad limit sends nothing")
	require.Equal(t, "/v1/audit", reqs[0].path)
	require.Equal(t, "actor=alice&cursor=3&limit=2&since=7d", reqs[0].query)
	require.Empty(t, reqs[1].query)
}
