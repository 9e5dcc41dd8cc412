package sandbox

import (
	"context"
	"testing"
)

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return ctx, cancel
}

var contextCanceled = context.Canceled
