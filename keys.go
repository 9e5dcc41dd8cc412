package longhaul

import (
	"context"
	"errors"
	"fmt"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// CreateKey creates an API key for the runtime's HTTP API (Handler). The
// returned key's Key is the token, shown only here: the store keeps only
// its hash.
func (rt *Runtime) CreateKey(ctx context.Context, req *lt.CreateKeyRequest) (*lt.APIKey, error) {
	if req == nil {
		return nil, errors.New("create key: req is nil")
	}
	k, err := rt.svc.CreateKey(asLibrary(ctx), req)
	if err != nil {
		return nil, fmt.Errorf("create key %s: %w", req.Name, apiError(err))
	}
	return k, nil
}

// ListKeys returns every API key's metadata, revoked ones included,
// oldest first; never a token.
func (rt *Runtime) ListKeys(ctx context.Context) (*lt.List[lt.APIKey], error) {
	l, err := rt.svc.ListKeys(asLibrary(ctx))
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", apiError(err))
	}
	return l, nil
}

// RevokeKey revokes an API key at once; revoking it again is no error.
func (rt *Runtime) RevokeKey(ctx context.Context, id string) error {
	if err := requireID("id", id); err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	if err := rt.svc.RevokeKey(asLibrary(ctx), id); err != nil {
		return fmt.Errorf("revoke key %s: %w", id, apiError(err))
	}
	return nil
}

// Me returns who the library calls as, the admin "library" of every
// project, and the methods it may call (all of them).
func (rt *Runtime) Me(ctx context.Context) (*lt.Identity, error) {
	me, err := rt.svc.Me(asLibrary(ctx))
	if err != nil {
		return nil, fmt.Errorf("me: %w", apiError(err))
	}
	return me, nil
}

// Version returns which build of Longhaul this program embeds: its module
// version (the dependency's, in a program that imports the library).
func (rt *Runtime) Version(ctx context.Context) (*lt.BuildInfo, error) {
	v, err := rt.svc.Version(asLibrary(ctx))
	if err != nil {
		return nil, fmt.Errorf("version: %w", apiError(err))
	}
	return v, nil
}
