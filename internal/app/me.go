package app

import (
	"context"

	"github.com/longhaul-dev/longhaul/internal/buildinfo"
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

// Version implements Service: the build of this process (every node of a
// deployment may run another one during a rolling upgrade).
func (a *App) Version(ctx context.Context) (*lt.BuildInfo, error) {
	if err := Allow(ctx, "Version"); err != nil {
		return nil, err
	}
	bi := buildinfo.Read()
	return &bi, nil
}
