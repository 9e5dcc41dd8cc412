package longhaul

import (
	"context"
	"fmt"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListRunners returns the runners (self-managed environments) connected
// to the server, of project ("": of every project). An embedded Runtime
// serves no runner connections, so its list is what nodes sharing its
// database hold.
func (rt *Runtime) ListRunners(ctx context.Context, project string) (*lt.List[lt.Runner], error) {
	l, err := rt.svc.ListRunners(asLibrary(ctx), project)
	if err != nil {
		return nil, fmt.Errorf("list runners: %w", apiError(err))
	}
	return l, nil
}
