package tool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// recordingBrowser answers every action and remembers the requests.
type recordingBrowser struct{ got []tool.BrowserRequest }

func (b *recordingBrowser) Do(_ context.Context, req *tool.BrowserRequest) (*tool.BrowserAnswer, error) {
	b.got = append(b.got, *req)
	return &tool.BrowserAnswer{URL: "https://shop.example/", Title: "Shop", PNG: []byte("\x89PNG-bytes")}, nil
}

// TestBrowserArguments: each action takes exactly its fields, and a missing
// or foreign one is an error naming it, before the browser is asked.
func TestBrowserArguments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args, wantErr string
	}{
		{`{"action":"open","url":"https://shop.example/","purpose":"prices"}`, ""},
		{`{"action":"open"}`, "arguments.url: is required for action open"},
		{`{"action":"open","url":"file:///etc/passwd"}`, "arguments.url: must be an absolute http or https address"},
		{`{"action":"open","url":"javascript:alert(1)"}`, "arguments.url: must be an absolute http or https address"},
		{`{"action":"click"}`, "arguments.selector: is required for action click"},
		{`{"action":"click","selector":"#buy","text":"x"}`, "arguments.text: action click takes no text"},
		{`{"action":"type","selector":"#q"}`, "arguments.text: is required for action type"},
		{`{"action":"type","selector":"#q","text":"cats"}`, ""},
		{`{"action":"press"}`, "arguments.key: is required for action press"},
		{`{"action":"read","selector":"main"}`, ""},
		{`{"action":"read","url":"https://x.example/"}`, "arguments.url: action read takes no url"},
		{`{"action":"fly"}`, "arguments.action"},
		{`{}`, "arguments.action"},
		{`{"action":"back","extra":1}`, "extra"},
		{`{"action":"login","url":"https://shop.example/login","secret":"SHOP_LOGIN"}`, ""},
		{`{"action":"login","url":"https://shop.example/login","secret":"SHOP_LOGIN","username_selector":"#u","password_selector":"#p","submit_selector":"#go"}`, ""},
		{`{"action":"login","url":"https://shop.example/login"}`, "arguments.secret: is required for action login"},
		{`{"action":"login","secret":"SHOP_LOGIN"}`, "arguments.url: is required for action login"},
		{`{"action":"login","url":"ftp://shop.example/","secret":"SHOP_LOGIN"}`, "arguments.url: must be an absolute http or https address"},
		{`{"action":"login","url":"https://shop.example/","secret":"SHOP_LOGIN","text":"hunter2"}`, "arguments.text: action login takes no text"},
		{`{"action":"open","url":"https://shop.example/","secret":"SHOP_LOGIN"}`, "arguments.secret: action open takes no secret"},
		{`{"action":"type","selector":"#q","text":"x","password_selector":"#p"}`, "arguments.password_selector: action type takes no password_selector"},
	}
	for _, c := range cases {
		b := &recordingBrowser{}
		res, err := (&tool.Browser{}).Run(context.Background(), &tool.Call{Arguments: json.RawMessage(c.args), Browser: b})
		require.NoError(t, err, c.args)
		if c.wantErr == "" {
			require.Empty(t, res.Error, c.args)
			require.Len(t, b.got, 1, c.args)
			continue
		}
		require.Contains(t, res.Error, c.wantErr, c.args)
		require.Empty(t, b.got, "%s: the browser was asked", c.args)
	}
}

// TestBrowserScreenshotIsAnArtifact: the PNG goes to SaveArtifact, and the
// model gets the artifact's id and a description, never the bytes.
func TestBrowserScreenshotIsAnArtifact(t *testing.T) {
	t.Parallel()
	var saved []byte
	call := &tool.Call{
		Arguments: json.RawMessage(`{"action":"screenshot"}`), Browser: &recordingBrowser{},
		SaveArtifact: func(_ context.Context, _ string, data []byte, ct string) (string, error) {
			require.Equal(t, "image/png", ct)
			saved = data
			return "art_1", nil
		},
	}
	res, err := (&tool.Browser{}).Run(context.Background(), call)
	require.NoError(t, err)
	require.Empty(t, res.Error)
	require.Equal(t, "\x89PNG-bytes", string(saved))
	out := res.Output.(tool.BrowserScreenshotOutput)
	require.Equal(t, "art_1", out.ArtifactID)
	require.Contains(t, out.Description, "art_1")

	// No browser: a clear error, not a crash.
	res, err = (&tool.Browser{}).Run(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"action":"read"}`)})
	require.NoError(t, err)
	require.Contains(t, res.Error, "no browser")
}

// TestBrowserEffect: open, read and screenshot read; the rest act.
func TestBrowserEffect(t *testing.T) {
	t.Parallel()
	for action, want := range map[string]lt.EffectClass{
		"open": lt.EffectRead, "read": lt.EffectRead, "screenshot": lt.EffectRead,
		"click": lt.EffectIrreversible, "type": lt.EffectIrreversible, "press": lt.EffectIrreversible,
		"back": lt.EffectIrreversible, "close": lt.EffectIrreversible, "login": lt.EffectIrreversible, "": lt.EffectIrreversible,
	} {
		require.Equal(t, want, tool.BrowserEffect(json.RawMessage(`{"action":"`+action+`"}`)), action)
	}
	require.Equal(t, lt.EffectIrreversible, tool.BrowserEffect(json.RawMessage(`not json`)))
}
