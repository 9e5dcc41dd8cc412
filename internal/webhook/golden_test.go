package webhook

import (
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// update rewrites the golden files from what the tests produce:
//
//	go test ./internal/webhook -run TestGolden -update
//
// Review the diff before committing it: a golden file is the wire format
// receivers depend on, so a change to one is a change of the API.
var update = flag.Bool("update", false, "rewrite testdata/*.golden from the output of the tests")

// fixedSecret is a signing secret whose 24 bytes are all b, so signatures
// are the same on every run.
func fixedSecret(b byte) string {
	return secretPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 24))
}

// TestGoldenWebhookRequests holds the exact requests receivers get: the
// method, the path, every header (the Standard Webhooks ones: webhook-id,
// webhook-timestamp, webhook-signature with one v1 signature per secret)
// and the body, for a session's own webhook_url and for a server-wide
// endpoint in the middle of a key rotation (two secrets), and a
// sub-agent's notification to each (its root's webhook_url, signed with
// the root's secret and naming the root, and the endpoint). Everything is
// fixed (the clock, the session id, the endpoint's id and the secrets), so
// nothing is normalized. Each request is written as received, its body
// followed by a line break.
func TestGoldenWebhookRequests(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var got []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %s\n", r.Method, r.RequestURI, r.Proto)
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range r.Header {
				if !yield(k) {
					return
				}
			}
		}) {
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(r.Header.Values(k), ", "))
		}
		fmt.Fprintf(&b, "\n%s\n", body)
		mu.Lock()
		got = append(got, b.String())
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)

	ctx := t.Context()
	require.NoError(t, e.st.WebhookEndpointCreate(ctx, &store.WebhookEndpointRow{
		Project: lt.DefaultProject, ID: "we_golden", URL: recv.URL + "/endpoint", Secrets: []string{fixedSecret(2), fixedSecret(3)}, CreatedAt: t0,
	}))
	e.createSession("ses_golden", recv.URL+"/session-hook?tag=a")
	_, err := e.st.WebhookSessionInit(ctx, "ses_golden", fixedSecret(1))
	require.NoError(t, err)
	e.status("ses_golden", lt.SessionRunning) // notifies nothing
	e.status("ses_golden", lt.SessionRequiresAction)
	e.status("ses_golden", lt.SessionRunning)
	e.status("ses_golden", lt.SessionIdle)
	e.createSubagent("ses_golden_child", "ses_golden")
	e.status("ses_golden_child", lt.SessionRequiresAction)

	e.start(allowFor(t, &receiver{srv: recv}))
	eventually(t, func() bool { return e.allDelivered(6) }, "the three notifications delivered to both targets")

	mu.Lock()
	defer mu.Unlock()
	slices.Sort(got) // deliveries run concurrently: order by the text of each request
	var out bytes.Buffer
	for _, req := range got {
		out.WriteString(req)
		out.WriteString("\n")
	}
	path := filepath.Join("testdata", "webhook_requests.golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, out.Bytes(), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run the test with -update to create %s", path)
	require.Equal(t, string(want), out.String(), "%s: the requests on the wire changed (if on purpose: -update, and review the diff)", path)
}
