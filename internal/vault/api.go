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

// PutSecret creates or replaces the secret name of req.Project ("": the
// default project; the application service checks who may name one) and
// returns its metadata and whether it was created (201) or replaced (200).
func (a *API) PutSecret(ctx context.Context, name string, req *lt.PutSecretRequest) (*lt.Secret, bool, error) {
	if req == nil {
		return nil, false, apierror.Invalid("", "request body is required")
	}
	m, created, err := a.v.put(ctx, req.Project, name, req.Value, req.Hosts, req.Inject)
	if err != nil {
		return nil, false, err
	}
	s := wire(*m)
	return &s, created, nil
}

// ListSecrets returns the metadata of every secret of project ("": of
// every project), by project and name.
func (a *API) ListSecrets(ctx context.Context, project string) ([]lt.Secret, error) {
	metas, err := a.v.List(ctx, project)
	if err != nil {
		return nil, err
	}
	out := make([]lt.Secret, len(metas))
	for i, m := range metas {
		out[i] = wire(m)
	}
	return out, nil
}

// DeleteSecret removes the secret name of project ("": the default
// project; 404 if there is none).
func (a *API) DeleteSecret(ctx context.Context, project, name string) error {
	return a.v.Delete(ctx, project, name)
}

func wire(m Meta) lt.Secret {
	hosts := m.Hosts
	if hosts == nil {
		hosts = []string{}
	}
	return lt.Secret{Project: m.Project, Name: m.Name, Hosts: hosts, Inject: m.Inject, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}
