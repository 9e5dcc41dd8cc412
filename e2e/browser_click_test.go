package e2e

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// movingPage is a page whose button moves down the first time the mouse is
// pressed anywhere, as a page does when a card above the button is
// re-rendered between a click's aim and its mouse events: that press and
// its release fall on different elements, so no click reaches the button.
// The top bar is sticky, as the web UI's is.
const movingPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>moving</title>
<style>
  header { position: sticky; top: 0; height: 60px; background: #eee; z-index: 10; }
  #filler { height: 1500px; }
</style></head>
<body>
<header>top bar</header>
<div id="filler"></div>
<div id="above"></div>
<button id="target" type="button">target</button>
<div style="height: 1500px"></div>
<script>
  window.presses = 0;
  window.targetClicks = 0;
  document.addEventListener('mousedown', () => {
    window.presses++;
    if (window.presses === 1) document.getElementById('above').style.height = '300px';
  }, true);
  document.getElementById('target').addEventListener('click', () => { window.targetClicks++; });
</script>
</body></html>`

// TestBrowserClickMadeAgainWhenThePageMoves: the browser tests' click,
// whose aim a moving page made miss, clicks again, and reaches its
// element once: the helper every web UI test clicks with, tested on its
// own (its miss was a flaky web UI test's lost tab click).
func TestBrowserClickMadeAgainWhenThePageMoves(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(movingPage))
	}))
	t.Cleanup(srv.Close)
	b := startBrowser(t)
	page := b.tab("moving")
	b.do(page, "open the moving page", navigate(srv.URL))

	b.click(page, "#target")
	var presses, clicks int
	b.eval(page, `window.presses`, &presses)
	b.eval(page, `window.targetClicks`, &clicks)
	require.Equal(t, 1, clicks, "the button was clicked once")
	require.Equal(t, 2, presses, "the first click missed (the page moved), the second reached the button")
}
