package storetest

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// testAppendKeepsWhatItDoesNotChange: a session's status, wake condition
// and spec read back as the appends left them, whether an append changes
// them or sets them again to the values they have (a driver may skip
// writing a column whose value does not change).
func testAppendKeepsWhatItDoesNotChange(t *testing.T, h *harness) {
	// A spec of several kilobytes (a driver may keep it apart from the
	// row every append rewrites) and a small one.
	large := json.RawMessage(`{"instructions":"` + strings.Repeat("be thorough; ", 700) + `"}`)
	h.createSession("ses_large", func(p *store.SessionCreateParams) { p.Session.Spec = large })
	h.createSession("ses_small")

	wake := at(time.Hour)
	later := at(2 * time.Hour)
	steps := []struct {
		status   string
		runnable bool
		wake     *time.Time
	}{
		{"running", true, &wake},   // all three change
		{"running", true, &wake},   // none changes
		{"running", true, &later},  // the wake time alone
		{"waiting", true, &later},  // the status alone
		{"waiting", false, &later}, // runnable alone
		{"waiting", false, nil},    // the wake time goes
		{"waiting", false, nil},    // none changes
	}
	for _, id := range []string{"ses_large", "ses_small"} {
		seq := int64(1)
		for i, st := range steps {
			h.append(id, seq, 1, func(p *store.EventAppendParams) {
				p.Status, p.Runnable, p.WakeAt = st.status, st.runnable, st.wake
			})
			seq++
			got := h.session(id)
			require.Equal(t, st.status, got.Status, "%s after append %d", id, i)
			require.Equal(t, st.runnable, got.Runnable, "%s after append %d", id, i)
			if st.wake == nil {
				require.Nil(t, got.WakeAt, "%s after append %d", id, i)
			} else {
				require.NotNil(t, got.WakeAt, "%s after append %d", id, i)
				require.Equal(t, *st.wake, *got.WakeAt, "%s after append %d", id, i)
			}
			require.Equal(t, seq, got.LastSeq)
			requireJSON(t, `{"seq":`+strconv.FormatInt(seq, 10)+`}`, got.State)
		}
	}
	requireJSON(t, string(large), h.session("ses_large").Spec)
	requireJSON(t, `{"goal":"test"}`, h.session("ses_small").Spec)

	var specs []string
	rows, err := h.s.SessionList(h.ctx, &store.SessionListParams{})
	require.NoError(t, err)
	for _, r := range rows {
		if r.ID == "ses_large" {
			specs = append(specs, string(r.Spec))
		}
	}
	require.Len(t, specs, 1)
	requireJSON(t, string(large), json.RawMessage(specs[0]), "a list reads the spec too")
}
