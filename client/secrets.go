package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// PutSecret creates the vault secret name, or replaces its value, hosts and
// injection (PUT /v1/secrets/{name}). It returns the secret's metadata (the
// value is never sent back) and whether it was created. Retrying it is safe:
// a PUT sets the same secret however often it arrives. Errors never contain
// the value.
func (c *Client) PutSecret(ctx context.Context, name string, req *lt.PutSecretRequest) (*lt.Secret, bool, error) {
	if err := requireID("name", name); err != nil {
		return nil, false, fmt.Errorf("put secret: %w", err)
	}
	if req == nil {
		return nil, false, fmt.Errorf("put secret %s: req is nil", name)
	}
	resp, err := c.send(ctx, &call{method: http.MethodPut, url: c.endpoint(nil, "v1", "secrets", name), body: req})
	if err != nil {
		return nil, false, fmt.Errorf("put secret %s: %w", name, err)
	}
	var s lt.Secret
	if err := json.Unmarshal(resp.body, &s); err != nil {
		return nil, false, fmt.Errorf("put secret %s: decode response (status %d): %w", name, resp.status, err)
	}
	return &s, resp.status == http.StatusCreated, nil
}

// ListSecrets returns the metadata of the vault secrets of project ("":
// of every project), by project and name (GET /v1/secrets?project=):
// projects, names, hosts, injection and times, never values.
func (c *Client) ListSecrets(ctx context.Context, project string) (*lt.List[lt.Secret], error) {
	q := url.Values{}
	setIf(q, "project", project)
	l, err := get[lt.List[lt.Secret]](ctx, c, c.endpoint(q, "v1", "secrets"))
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return l, nil
}

// DeleteSecret removes the vault secret name of project ("": the default
// project) (DELETE /v1/secrets/{name}?project=); an unknown name is an
// *APIError with status 404 (IsNotFound).
func (c *Client) DeleteSecret(ctx context.Context, project, name string) error {
	if err := requireID("name", name); err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	q := url.Values{}
	setIf(q, "project", project)
	if err := c.doJSON(ctx, &call{method: http.MethodDelete, url: c.endpoint(q, "v1", "secrets", name)}, nil); err != nil {
		return fmt.Errorf("delete secret %s: %w", name, err)
	}
	return nil
}
