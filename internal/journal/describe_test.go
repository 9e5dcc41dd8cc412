package journal_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/journal"
)

func TestDescribeCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ tool, args, want string }{
		{"send_email", `{"to":"bob@example.com","subject":"Quarterly numbers","body":"…"}`, "Email to bob@example.com: “Quarterly numbers”"},
		{"notify", `{"to":["a@x.com","b@x.com"]}`, "Email to a@x.com, b@x.com"},
		{"shell", `{"command":"sh stats.sh"}`, "Run `sh stats.sh` in the workspace"},
		{"shell", `{"command":"set -e\nmake"}`, "Run `set -e …` in the workspace"},
		{"http_request", `{"method":"post","url":"https://api.example.com/v1/items"}`, "POST to api.example.com/v1/items"},
		{"http_request", `{"url":"https://api.example.com/x?token=secret"}`, "GET api.example.com/x?…"},
		{"write_file", `{"path":"notes.md","content":"abc"}`, "Write notes.md (3 bytes)"},
		{"read_file", `{"path":"notes.md"}`, "Read notes.md"},
		{"deploy", `{"env":"prod","url":"https://x.example"}`, `deploy: url="https://x.example", env="prod"`},
		{"deploy", `not json`, "deploy"},
		{"deploy", `["a"]`, "deploy"},
		{"notify", `{"to":"a@x.com","subject":5,"title":"T"}`, "Email to a@x.com: “T”"},
		{"notify", `{"to":["a@x.com",1],"i":2}`, `notify: i=2, to=["a@x.com",1]`},
	} {
		require.Equal(t, tc.want, journal.DescribeCall(tc.tool, json.RawMessage(tc.args)), "%s %s", tc.tool, tc.args)
	}
	long := journal.DescribeCall("shell", json.RawMessage(`{"command":"`+strings.Repeat("x", 5000)+`"}`))
	require.LessOrEqual(t, len(long), 200+len("…"))
	require.Equal(t, `send_email(subject="Q3", to="bob@example.com")`, journal.RawCall("send_email", json.RawMessage(`{"to":"bob@example.com","subject":"Q3"}`)))
}

func TestDescribeResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ output, err, want string }{
		{`{"exit_code":0,"stdout":"\n3 rows\nmore","stderr":""}`, "", "exit 0: 3 rows"},
		{`{"exit_code":-1,"stdout":"","stderr":"","timed_out":true,"signal":"SIGKILL"}`, "", "exit -1, timed out, killed by SIGKILL"},
		{`{"path":"a.txt","bytes":12,"sha256":"ab"}`, "", "wrote 12 bytes to a.txt"},
		{`{"path":"a.txt","sha256":"ab"}`, "", "edited a.txt"},
		{`{"status":201,"url":"https://x","body":"{\"id\":1}"}`, "", `HTTP 201: {"id":1}`},
		{`{"sent":true}`, "", `{"sent":true}`},
		{`null`, "", "done"},
		{``, "quota exceeded\nmore detail", "failed: quota exceeded …"},
	} {
		require.Equal(t, tc.want, journal.DescribeResult(json.RawMessage(tc.output), tc.err), tc.output)
	}
}
