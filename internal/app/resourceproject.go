package app

import (
	"context"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The project of agents, secrets and webhook endpoints, as API.md gives
// it: a key that is not an admin's works in its own project only (naming
// another is a 403 on the field project, and what another project holds
// is not found); an admin works in every project, names one in the body or
// with ?project=, and writes and reads by name in the default project
// unless it names another.

// seesEveryProject reports whether c works in every project: an admin, or
// a caller with no project (the bootstrap key, the library, a local
// request).
func seesEveryProject(c Caller) bool {
	return c.Role == lt.RoleAdmin || c.Project == ""
}

// namedProject is the project a request about one named resource (a write,
// or a read by name) works in: the caller's own for a key of one project,
// named (default lt.DefaultProject) for an admin. named is checked.
func namedProject(ctx context.Context, named string) (string, error) {
	c, _ := CallerFrom(ctx) // Allow has refused a missing caller already
	if !seesEveryProject(c) {
		if named != "" && named != c.Project {
			return "", otherProject(c, named)
		}
		return c.Project, nil
	}
	if named == "" {
		return lt.DefaultProject, nil
	}
	if err := checkProject(named); err != nil {
		return "", err
	}
	return named, nil
}

// listedProject is the project a list keeps to: the caller's own for a
// key of one project, filter for an admin ("": every project). filter is
// checked.
func listedProject(ctx context.Context, filter string) (string, error) {
	if c, _ := CallerFrom(ctx); filter == "" && seesEveryProject(c) {
		return "", nil
	}
	return namedProject(ctx, filter)
}

// visibleProject is the project whose resources a request by id may reach:
// "" (every project) for an admin, the caller's own otherwise. A resource
// of another project answers 404, as one that does not exist.
func visibleProject(ctx context.Context) string {
	c, _ := CallerFrom(ctx)
	if seesEveryProject(c) {
		return ""
	}
	return c.Project
}

func checkProject(p string) error {
	if !projectRE.MatchString(p) {
		return apierror.Invalid("project", "project must be 1 to 63 lowercase letters, digits, '-' or '_', starting with a letter or a digit, got %q", p)
	}
	return nil
}

func otherProject(c Caller, named string) error {
	err := apierror.Forbidden("a key of project %s may not work in project %q", c.Project, named)
	err.Field = "project"
	return err
}
