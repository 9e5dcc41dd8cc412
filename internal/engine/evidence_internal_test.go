package engine

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScriptFiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		command string
		want    []string
	}{
		{"sh stats.sh", []string{"stats.sh"}},
		{"bash -x ./deploy.sh --fast", []string{"deploy.sh"}},
		{"FOO=1 env time python3 -u jobs/run.py && ./tools/check | sort", []string{"jobs/run.py", "tools/check"}},
		{"python3 -c 'print(1)'", nil},
		{"python3 -m http.server", nil},
		{"echo hi > out.txt; cat out.txt", nil},
		{"sh /etc/profile; sh ../outside.sh; sh $HOME/x.sh", nil},
		{". ./env.sh; source lib.sh", []string{"env.sh", "lib.sh"}},
		{"sh a.sh; sh ./a.sh", []string{"a.sh"}},
	} {
		require.Equal(t, tc.want, scriptFiles(tc.command), tc.command)
	}
}

func TestLineDiff(t *testing.T) {
	t.Parallel()
	before := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
	after := "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n"
	require.Equal(t, strings.Join([]string{
		"--- f.txt", "+++ f.txt",
		"@@ -1,5 +1,5 @@", " a", "-b", "+B", " c", " d", " e",
		"@@ -9,3 +9,4 @@", " i", " j", " k", "+l",
	}, "\n"), lineDiff("f.txt", before, after))
	require.Equal(t, "--- new\n+++ new\n@@ -0,0 +1 @@\n+x", lineDiff("new", "", "x"))
}
