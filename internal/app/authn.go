package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ErrInvalidKey is Authenticate's answer to a token that names no usable
// key: unknown, revoked or expired. A transport answers all three alike
// (401 "invalid API key"), so a holder of a dead key learns nothing more.
var ErrInvalidKey = errors.New("invalid API key")

// TouchInterval is how often a key's LastUsedAt is written: at most once
// per interval per key, so a busy key costs one read per request and one
// write per interval.
const TouchInterval = time.Minute

// The callers that are not a stored key.
var (
	// BootstrapCaller is a key given to serve (--api-key,
	// LONGHAUL_API_KEYS): an admin of every project.
	BootstrapCaller = Caller{Name: "bootstrap", Role: lt.RoleAdmin}
	// LocalCaller is a loopback peer of a server without API keys (the
	// machine's user): an admin of every project.
	LocalCaller = Caller{Name: "local", Role: lt.RoleAdmin}
	// LibraryCaller is the program that embeds the library (Runtime): it
	// owns the runtime, so it is an admin of every project.
	LibraryCaller = Caller{Name: "library", Role: lt.RoleAdmin}
	// ConfigCaller is the operator's config file (serve --config): whoever
	// wrote it runs the server, so it is an admin of every project.
	ConfigCaller = Caller{Name: "config", Role: lt.RoleAdmin}
)

// Authenticate returns the caller a stored API key's token names, or
// ErrInvalidKey. It reads the key from the store on every call, with no
// cache: a revocation on any node holds from the next request on, on every
// node. It records the use (LastUsedAt) when the stored one is older than
// TouchInterval; a failure to record it is logged, not the request's.
func (a *App) Authenticate(ctx context.Context, token string) (Caller, error) {
	if !strings.HasPrefix(token, KeyTokenPrefix) {
		// Not a stored key's shape: no read for it.
		return Caller{}, ErrInvalidKey
	}
	row, err := a.store.APIKeyByHash(ctx, HashKeyToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return Caller{}, ErrInvalidKey
	}
	if err != nil {
		return Caller{}, fmt.Errorf("authenticate: %w", err)
	}
	now := a.now()
	if row.RevokedAt != nil || (row.ExpiresAt != nil && !now.Before(*row.ExpiresAt)) {
		return Caller{}, ErrInvalidKey
	}
	if row.LastUsedAt == nil || now.Sub(*row.LastUsedAt) >= TouchInterval {
		if err := a.store.APIKeyTouch(ctx, row.ID, now); err != nil {
			a.log.Warn("record an API key's use", "key_id", row.ID, "err", err)
		}
	}
	return Caller{KeyID: row.ID, Name: row.Name, Role: lt.Role(row.Role), Project: row.Project}, nil
}
