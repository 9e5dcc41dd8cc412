package vault

import (
	"context"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// API serves the vault's HTTP endpoints (PUT, GET and DELETE /v1/secrets):
// it implements the secret methods of the server's backend, so the engine
// can embed it or the server can be given it. It never returns a value.
type API struct {
	v *Vault
}

// NewAPI returns the API of v.
func NewAPI(v *Vault) *API { return &API{v: v} }

// PutSecret creates or replaces a secret and returns its metadata and
// whether it was created (201) or replaced (200).
func (a *API) PutSecret(ctx context.Context, name string, req *lt.PutSecretRequest) (*lt.Secret, bool, error) {
	if req == nil {
		return nil, false, apierror.Invalid("", "request body is required")
	}
	m, created, err := a.v.put(ctx, name, req.Value, req.Hosts, req.Inject)
	if err != nil {
		return nil, false, err
	}
	s := wire(*m)
	return &s, created, nil
}

// ListSecrets returns every secret's metadata, by name.
func (a *API) ListSecrets(ctx context.Context) ([]lt.Secret, error) {
	metas, err := a.v.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]lt.Secret, len(metas))
	for i, m := range metas {
		out[i] = wire(m)
	}
	return out, nil
}

// DeleteSecret removes a secret (404 if there is none).
func (a *API) DeleteSecret(ctx context.Context, name string) error {
	return a.v.Delete(ctx, name)
}

func wire(m Meta) lt.Secret {
	hosts := m.Hosts
	if hosts == nil {
		hosts = []string{}
	}
	return lt.Secret{Name: m.Name, Hosts: hosts, Inject: m.Inject, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}
