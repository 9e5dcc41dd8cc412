package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestAuditRetention: PruneAudit deletes the entries older than the
// retention as of the App's clock, and only them; again it deletes
// nothing; retention 0 keeps everything. ListAudit's since counts back
// from the same clock.
func TestAuditRetention(t *testing.T) {
	t.Parallel()
	day0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := apptest.NewClock(day0)
	st, eng := apptest.Engine(t, nil)
	a := apptest.NewWithClock(t, st, eng, nil, clock.Now)
	ctx := app.WithCaller(t.Context(), app.LibraryCaller)

	for d := range 4 { // entries on days 0, 10, 20 and 30
		_, err := a.RecordAudit(ctx, &lt.AuditEntry{Time: day0.Add(time.Duration(d) * 10 * 24 * time.Hour),
			Actor: &lt.Actor{Name: "ops", Role: lt.RoleOperator}, Method: "POST", Route: "POST /v1/sessions", Status: 201, RequestID: "r"})
		require.NoError(t, err)
	}
	days := func() []int {
		t.Helper()
		l, err := a.ListAudit(ctx, lt.ListAuditParams{})
		require.NoError(t, err)
		var out []int
		for _, e := range l.Data {
			out = append(out, int(e.Time.Sub(day0)/(24*time.Hour)))
		}
		return out
	}

	clock.Set(day0.Add(35 * 24 * time.Hour))
	n, err := a.PruneAudit(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n, "0 keeps every entry")
	require.Equal(t, []int{0, 10, 20, 30}, days())

	l, err := a.ListAudit(ctx, lt.ListAuditParams{Since: "10d"})
	require.NoError(t, err)
	require.Len(t, l.Data, 1, "since counts back from the App's clock")

	n, err = a.PruneAudit(ctx, 20*24*time.Hour)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "days 0 and 10 are older than 20 days at day 35")
	require.Equal(t, []int{20, 30}, days())
	n, err = a.PruneAudit(ctx, 20*24*time.Hour)
	require.NoError(t, err)
	require.Zero(t, n, "pruning again (another node) deletes nothing")

	clock.Set(day0.Add(60 * 24 * time.Hour))
	_, err = a.PruneAudit(ctx, app.DefaultAuditRetention)
	require.NoError(t, err)
	require.Equal(t, []int{20, 30}, days(), "90 days keep them")
}

// TestListAuditInvalid: bad parameters are 400s naming them.
func TestListAuditInvalid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for field, p := range map[string]lt.ListAuditParams{
		"since":  {Since: "last tuesday"},
		"cursor": {Cursor: "-1"},
		"limit":  {Limit: 1001},
	} {
		_, err := f.app.ListAudit(f.ctx, p)
		e := apierror.From(err)
		require.Equal(t, http.StatusBadRequest, e.Status, "%s: %v", field, err)
		require.Equal(t, field, e.Field)
	}
}

// TestKeyPrefix: a refused token is kept as its first characters, never
// more than half of it.
func TestKeyPrefix(t *testing.T) {
	t.Parallel()
	require.Equal(t, "lh_abcdefgh", app.KeyPrefix("lh_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"))
	require.Equal(t, "lh_a", app.KeyPrefix("lh_abcde"), "never more than half")
	require.Equal(t, "", app.KeyPrefix("hunter22"), "nothing of a bootstrap key or a password")
	require.Equal(t, "", app.KeyPrefix("x"))
	require.Equal(t, "lh_ä", app.KeyPrefix("lh_ääää"), "cut at a character boundary")
}
