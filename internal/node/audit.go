package node

import (
	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/server"
)

// DefaultAuditRetention is how long the audit log keeps an entry unless
// Config.AuditRetention says otherwise.
const DefaultAuditRetention = app.DefaultAuditRetention

// ValidRateLimit checks a --rate-limit spec (server.ParseRateLimits), so
// that the serve command refuses a bad one before it opens anything.
func ValidRateLimit(spec string) error {
	_, err := server.ParseRateLimits(spec)
	return err
}
