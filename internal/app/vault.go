package app

import (
	"context"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// PutSecret implements Service: the secret goes into req.Project (default
// lt.DefaultProject), the only project whose sessions may use it.
func (a *App) PutSecret(ctx context.Context, name string, req *lt.PutSecretRequest) (*lt.Secret, bool, error) {
	if err := Allow(ctx, "PutSecret"); err != nil {
		return nil, false, err
	}
	if req != nil {
		project, err := creationProject(ctx, req.Project)
		if err != nil {
			return nil, false, err
		}
		in := *req
		in.Project = project
		req = &in
	}
	return a.vault.PutSecret(ctx, name, req)
}

// ListSecrets implements Service: the secrets of project ("": of every
// project).
func (a *App) ListSecrets(ctx context.Context, project string) (*lt.List[lt.Secret], error) {
	if err := Allow(ctx, "ListSecrets"); err != nil {
		return nil, err
	}
	project, err := listProject(ctx, project)
	if err != nil {
		return nil, err
	}
	secrets, err := a.vault.ListSecrets(ctx, project)
	if err != nil {
		return nil, err
	}
	return list(secrets), nil
}

// DeleteSecret implements Service: the secret name of project (default
// lt.DefaultProject).
func (a *App) DeleteSecret(ctx context.Context, project, name string) error {
	if err := Allow(ctx, "DeleteSecret"); err != nil {
		return err
	}
	project, err := creationProject(ctx, project)
	if err != nil {
		return err
	}
	return a.vault.DeleteSecret(ctx, project, name)
}
