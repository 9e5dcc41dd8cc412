package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// maxIdempotencyKey bounds a caller's key; the server stores it with the
// first response.
const maxIdempotencyKey = 255

type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns a context whose POST calls send key as their
// Idempotency-Key instead of a fresh random one. Use it to make a call safe
// to repeat across processes (a script re-run after a crash sends the same
// key, and the server returns the first response). Every POST made with the
// returned context shares the key, so derive one context per logical call.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// idempotencyKey is the key for one logical POST call: the caller's, or a
// random one. The caller reuses it on every retry of that call, which is what
// makes retrying a POST safe.
func idempotencyKey(ctx context.Context) (string, error) {
	key, ok := ctx.Value(idempotencyKeyCtx{}).(string)
	if !ok || key == "" {
		return uuid.NewString(), nil
	}
	if len(key) > maxIdempotencyKey {
		return "", fmt.Errorf("idempotency key: longer than %d bytes", maxIdempotencyKey)
	}
	// HTTP trims a header value's outer spaces, so such a key would not
	// reach the server as given.
	if strings.TrimSpace(key) != key {
		return "", fmt.Errorf("idempotency key: starts or ends with a space")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", fmt.Errorf("idempotency key: byte %d is not printable ASCII", i)
		}
	}
	return key, nil
}
