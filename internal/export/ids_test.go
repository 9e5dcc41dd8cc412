package export

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// TestImportRefusesCraftedIDs: an export whose session or record ids the
// engine would never make (a path, a separator, upper case, another
// prefix) is refused naming the field, and nothing is written.
func TestImportRefusesCraftedIDs(t *testing.T) {
	t.Parallel()
	src, id := workSession(t, 1<<10)
	src.stop()
	path, _ := exportTo(t, src.st, id, nil)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	good := string(data)
	firstTurn := ""
	for _, line := range strings.SplitAfter(good, "\n") {
		if strings.Contains(line, `"kind":"doc"`) && strings.Contains(line, `"id":"turn_`) {
			i := strings.Index(line, `"id":"`) + len(`"id":"`)
			firstTurn = line[i : i+strings.Index(line[i:], `"`)]
			break
		}
	}
	require.True(t, strings.HasPrefix(firstTurn, "turn_"), "a turn doc in the export")

	tests := []struct {
		name, from, to, want string
	}{
		{"a path as the session id", id, "../../etc", `header: session_id "../../etc" is not a session id`},
		{"a separator in the session id", id, "ses_abc/def", `header: session_id "ses_abc/def" is not a session id`},
		{"upper case", id, strings.ToUpper(id), `is not a session id`},
		{"another prefix", id, "turn_" + id[4:], `is not a session id`},
		{"an empty suffix", id, "ses_", `is not a session id`},
		{"a path as a record id", firstTurn, "turn_../../x", `id "turn_../../x" is not a record id`},
	}
	dst := openSQLite(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "crafted.jsonl")
			require.NoError(t, os.WriteFile(p, []byte(strings.ReplaceAll(good, `"`+tt.from+`"`, `"`+tt.to+`"`)), 0o600))
			_, err := importFrom(t, dst, p, nil)
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tt.want)
			list, err := dst.SessionList(ctx, &store.SessionListParams{Limit: 10})
			require.NoError(t, err)
			require.Empty(t, list, "nothing was written")
		})
	}

	// A parent id that is not a session id.
	lines := fileLines(strings.SplitAfter(good, "\n"))
	crafted := lines.edit(t, lines.index(t, kindSession, 0), func(m map[string]any) { m["parent_id"] = "../ses_x" })
	p := filepath.Join(t.TempDir(), "parent.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(crafted, "")), 0o600))
	_, err = importFrom(t, dst, p, nil)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `parent_id "../ses_x" is not a session id`)

	// The untouched file imports; a second import collides and is refused
	// as a conflict, leaving the first intact.
	_, err = importFrom(t, dst, path, nil)
	require.NoError(t, err)
	_, err = importFrom(t, dst, path, nil)
	require.ErrorIs(t, err, store.ErrConflict)
	require.ErrorContains(t, err, "already exists in the target store")
	requireSameSession(t, src.st, dst, id)
}
