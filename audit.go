package longhaul

import (
	"context"
	"fmt"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListAudit returns a page of the audit log of the runtime's HTTP API
// (Handler), oldest first: every state-changing request and every refused
// one. Calls of the library itself are not requests, and not entries.
func (rt *Runtime) ListAudit(ctx context.Context, p lt.ListAuditParams) (*lt.List[lt.AuditEntry], error) {
	l, err := rt.svc.ListAudit(asLibrary(ctx), p)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", apiError(err))
	}
	return l, nil
}
