package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/journal"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestBrowserLoginEvidence: a person asked to approve a login sees the
// address and the secret's name (the call holds no value to show).
func TestBrowserLoginEvidence(t *testing.T) {
	args, _ := json.Marshal(map[string]string{"action": "login", "url": "https://shop.example.com/login", "secret": "SHOP_LOGIN", "purpose": "order paper"})
	got := strings.Join(browserEvidence(&journal.Call{Tool: browserTool, Kind: lt.CallBuiltin, Arguments: args}, ""), "\n")
	for _, want := range []string{"Browser action login at URL https://shop.example.com/login", "vault secret SHOP_LOGIN", "order paper"} {
		if !strings.Contains(got, want) {
			t.Fatalf("evidence %q does not say %q", got, want)
		}
	}
}
