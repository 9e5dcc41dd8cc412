package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// CreateKey creates an API key (POST /v1/keys, admin only). The returned
// key's Key is the token, shown only here: keep it, the server stores only
// its hash. It is not retried (a retry after a lost answer would create a
// second key): on a transport error, list the keys and revoke a stray one.
func (c *Client) CreateKey(ctx context.Context, req *lt.CreateKeyRequest) (*lt.APIKey, error) {
	if req == nil {
		return nil, errors.New("create key: req is nil")
	}
	var k lt.APIKey
	if err := c.doJSON(ctx, &call{method: http.MethodPost, url: c.endpoint(nil, "v1", "keys"), body: req, noRetry: true}, &k); err != nil {
		return nil, fmt.Errorf("create key %s: %w", req.Name, err)
	}
	return &k, nil
}

// ListKeys returns every API key's metadata, revoked ones included, oldest
// first (GET /v1/keys, admin only); never a token.
func (c *Client) ListKeys(ctx context.Context) (*lt.List[lt.APIKey], error) {
	l, err := get[lt.List[lt.APIKey]](ctx, c, c.endpoint(nil, "v1", "keys"))
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return l, nil
}

// RevokeKey revokes an API key at once, on every node (DELETE
// /v1/keys/{id}, admin only); revoking it again is no error, an unknown id
// is an *APIError with status 404 (IsNotFound).
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	if err := requireID("id", id); err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	if err := c.doJSON(ctx, &call{method: http.MethodDelete, url: c.endpoint(nil, "v1", "keys", id)}, nil); err != nil {
		return fmt.Errorf("revoke key %s: %w", id, err)
	}
	return nil
}

// Me returns who the client's key is and the methods its role may call
// (GET /v1/me, any role): what a client checks before it offers an
// operation that would otherwise be a 403.
func (c *Client) Me(ctx context.Context) (*lt.Identity, error) {
	me, err := get[lt.Identity](ctx, c, c.endpoint(nil, "v1", "me"))
	if err != nil {
		return nil, fmt.Errorf("me: %w", err)
	}
	return me, nil
}

// Version returns which build of Longhaul the server runs: its module
// version and VCS revision (GET /v1/version, any role but a runner).
func (c *Client) Version(ctx context.Context) (*lt.BuildInfo, error) {
	v, err := get[lt.BuildInfo](ctx, c, c.endpoint(nil, "v1", "version"))
	if err != nil {
		return nil, fmt.Errorf("version: %w", err)
	}
	return v, nil
}
