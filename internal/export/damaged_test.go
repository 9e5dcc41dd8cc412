package export

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// fileLines is an export file split into its lines (newlines kept).
type fileLines []string

func (l fileLines) index(t *testing.T, kind string, nth int) int {
	t.Helper()
	for i, line := range l {
		if strings.HasPrefix(line, `{"kind":"`+kind+`"`) {
			if nth == 0 {
				return i
			}
			nth--
		}
	}
	t.Fatalf("no %s line #%d", kind, nth)
	return -1
}

func (l fileLines) without(i int) fileLines {
	return append(append(fileLines{}, l[:i]...), l[i+1:]...)
}

func (l fileLines) with(i int, line string) fileLines {
	out := append(fileLines{}, l...)
	out[i] = line
	return out
}

// edit decodes line i as JSON, lets f change it, and encodes it again.
func (l fileLines) edit(t *testing.T, i int, f func(m map[string]any)) fileLines {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(l[i]), &m))
	f(m)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return l.with(i, string(b)+"\n")
}

// endCounts rewrites the end record's counts with f.
func (l fileLines) endCounts(t *testing.T, f func(c map[string]any)) fileLines {
	t.Helper()
	return l.edit(t, l.index(t, kindEnd, 0), func(m map[string]any) { f(m["counts"].(map[string]any)) })
}

// TestImportRefusesDamagedFiles: a file with a damaged blob, a gap in a
// journal, a truncation, a missing blob, wrong counts, another format or a
// newer version is refused with an error that says what is wrong, and
// nothing is written to the target store.
func TestImportRefusesDamagedFiles(t *testing.T) {
	t.Parallel()
	src, id := workSession(t, 64<<10)
	src.stop()
	path, sum := exportTo(t, src.st, id, nil)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	good := fileLines(strings.SplitAfter(string(data), "\n"))
	if good[len(good)-1] == "" {
		good = good[:len(good)-1]
	}
	require.Len(t, good, 2+sum.Events+sum.Docs+sum.Blobs+1)
	var blobs []string
	for _, line := range good {
		var b blobLine
		if strings.HasPrefix(line, `{"kind":"blob"`) {
			require.NoError(t, json.Unmarshal([]byte(line), &b))
			blobs = append(blobs, b.SHA256)
		}
	}
	lastBlob := good.index(t, kindBlob, sum.Blobs-1)

	tests := []struct {
		name  string
		lines func() fileLines
		want  string
	}{{
		name: "a blob's bytes changed",
		lines: func() fileLines {
			return good.edit(t, good.index(t, kindBlob, 0), func(m map[string]any) {
				b, err := base64.StdEncoding.DecodeString(m["content"].(string))
				require.NoError(t, err)
				b[len(b)/2] ^= 0xff
				m["content"] = base64.StdEncoding.EncodeToString(b)
			})
		},
		want: "its content's sha256 is",
	}, {
		name:  "a gap in the journal",
		lines: func() fileLines { return good.without(good.index(t, kindEvent, 2)) },
		want:  "event seq 4 where seq 3 was due",
	}, {
		name: "events out of order",
		lines: func() fileLines {
			i := good.index(t, kindEvent, 3)
			return good.with(i, good[i+1]).with(i+1, good[i])
		},
		want: "event seq 5 where seq 4 was due",
	}, {
		name: "the journal's end is missing",
		lines: func() fileLines {
			return good.without(good.index(t, kindEvent, sum.Events-1)).endCounts(t, func(c map[string]any) { c["events"] = float64(sum.Events - 1) })
		},
		want: "events are missing",
	}, {
		name: "truncated in the middle of a line",
		lines: func() fileLines {
			return fileLines{strings.Join(good[:lastBlob], "") + good[lastBlob][:len(good[lastBlob])/2]}
		},
		want: "damaged or truncated",
	}, {
		name:  "truncated at a line's end",
		lines: func() fileLines { return good[:lastBlob] },
		want:  "the file is truncated",
	}, {
		name: "a referenced blob is missing",
		lines: func() fileLines {
			return good.without(lastBlob).endCounts(t, func(c map[string]any) { c["blobs"] = float64(sum.Blobs - 1) })
		},
		want: "is not in the file",
	}, {
		name: "the end record's counts are wrong",
		lines: func() fileLines {
			return good.endCounts(t, func(c map[string]any) { c["docs"] = float64(sum.Docs + 1) })
		},
		want: "the end record counts",
	}, {
		name:  "content after the end",
		lines: func() fileLines { return append(append(fileLines{}, good...), good[2]) },
		want:  "content after the end record",
	}, {
		name: "a blob's size is wrong",
		lines: func() fileLines {
			return good.edit(t, good.index(t, kindBlob, 1), func(m map[string]any) { m["size"] = m["size"].(float64) + 1 })
		},
		want: "its size says",
	}, {
		name:  "not an export file",
		lines: func() fileLines { return fileLines{"hello\n"} },
		want:  "not a Longhaul session export",
	}, {
		name:  "an empty file",
		lines: func() fileLines { return nil },
		want:  "the file is empty",
	}, {
		name: "a newer format version",
		lines: func() fileLines {
			return good.edit(t, 0, func(m map[string]any) { m["version"] = float64(Version + 1) })
		},
		want: "format version 2 is newer than this longhaul's (1)",
	}, {
		name: "an event of another session",
		lines: func() fileLines {
			return good.edit(t, good.index(t, kindEvent, 0), func(m map[string]any) { m["session_id"] = "ses_other" })
		},
		want: `an event of session "ses_other" outside that session's lines`,
	}}
	dst := openSQLite(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "damaged.jsonl")
			require.NoError(t, os.WriteFile(p, []byte(strings.Join(tt.lines(), "")), 0o600))
			_, err := importFrom(t, dst, p, nil)
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tt.want)
			// Nothing was written.
			_, err = dst.SessionGet(ctx, id)
			require.ErrorIs(t, err, store.ErrNotFound)
			for _, d := range blobs {
				has, err := dst.BlobHas(ctx, d)
				require.NoError(t, err)
				require.False(t, has, "blob %s", d)
			}
		})
	}
	// The untouched file imports.
	_, err = importFrom(t, dst, path, nil)
	require.NoError(t, err)
	requireSameSession(t, src.st, dst, id)
}
