package app

import (
	"context"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Me implements Service: the caller the transport authenticated, and the
// methods its role may call. It reads nothing from the store: the key was
// read (and found valid) by the authentication that made the caller.
func (a *App) Me(ctx context.Context) (*lt.Identity, error) {
	if err := Allow(ctx, "Me"); err != nil {
		return nil, err
	}
	c, _ := CallerFrom(ctx) // Allow refused a missing caller
	return &lt.Identity{
		KeyID:       c.KeyID,
		Name:        c.Name,
		Role:        c.Role,
		Project:     c.Project,
		Permissions: AllowedMethods(c.Role),
	}, nil
}
