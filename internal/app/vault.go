package app

import (
	"context"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// PutSecret implements Service.
func (a *App) PutSecret(ctx context.Context, name string, req *lt.PutSecretRequest) (*lt.Secret, bool, error) {
	if err := Allow(ctx, "PutSecret"); err != nil {
		return nil, false, err
	}
	return a.vault.PutSecret(ctx, name, req)
}

// ListSecrets implements Service.
func (a *App) ListSecrets(ctx context.Context) (*lt.List[lt.Secret], error) {
	if err := Allow(ctx, "ListSecrets"); err != nil {
		return nil, err
	}
	secrets, err := a.vault.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	return list(secrets), nil
}

// DeleteSecret implements Service.
func (a *App) DeleteSecret(ctx context.Context, name string) error {
	if err := Allow(ctx, "DeleteSecret"); err != nil {
		return err
	}
	return a.vault.DeleteSecret(ctx, name)
}
