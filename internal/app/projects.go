package app

import (
	"context"
	"errors"
	"iter"
	"regexp"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// projectRE is a project's syntax: a lowercase letter or digit, then up
// to 62 lowercase letters, digits, '-' or '_' (a name that is safe in a
// path, a label and a log line).
var projectRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// checkProjectName refuses a project name outside projectRE, as a 400
// naming project.
func checkProjectName(project string) error {
	if !projectRE.MatchString(project) {
		return apierror.Invalid("project", "project must be 1 to 63 lowercase letters, digits, '-' or '_', starting with a letter or a digit, got %s", quoteValue(project))
	}
	return nil
}

// scope is the part of the server a caller sees: every project (an admin),
// or one.
type scope struct {
	all     bool
	project string
}

// scopeOf returns the scope of the caller ctx carries. Only the admin role
// sees every project, whatever project its key names; any other caller
// sees its own project, the default one if it names none (what was made
// without a project is in the default one), never every project.
func scopeOf(ctx context.Context) scope {
	c, _ := CallerFrom(ctx)
	switch {
	case c.Role == lt.RoleAdmin:
		return scope{all: true}
	case c.Project == "":
		return scope{project: lt.DefaultProject}
	default:
		return scope{project: c.Project}
	}
}

// sees reports whether the scope holds what belongs to project.
func (s scope) sees(project string) bool { return s.all || s.project == project }

// creationProject is the project of what the caller creates when it asks
// for asked (a body's "project", "" when absent): an admin's choice, by
// default its key's project (API.md: "the key's, or "project" in the body
// for an admin key"), the default project for an admin without one (a
// bootstrap key, the library); any other caller's own project, which it
// may name but not leave (a 403 naming project).
func creationProject(ctx context.Context, asked string) (string, error) {
	project, err := listProject(ctx, asked)
	if project == "" && err == nil {
		c, _ := CallerFrom(ctx)
		project = c.Project
		if project == "" {
			project = lt.DefaultProject
		}
	}
	return project, err
}

// listProject is the project a list keeps when the caller asks for asked
// ("" for all it sees): an admin's choice ("" for every project); any
// other caller's own project, which it may name but not leave (a 403
// naming project).
func listProject(ctx context.Context, asked string) (string, error) {
	s := scopeOf(ctx)
	if !s.all {
		if asked != "" && asked != s.project {
			return "", otherProject(asked, s.project)
		}
		return s.project, nil
	}
	if asked != "" {
		if err := checkProjectName(asked); err != nil {
			return "", err
		}
	}
	return asked, nil
}

// otherProject is the 403 of a caller naming a project not its own. The
// project is not secret to its own caller; whether the other one exists is
// not said.
func otherProject(asked, own string) error {
	e := apierror.Forbidden("a key of project %s may not reach project %s", quoteValue(own), quoteValue(asked))
	e.Field = "project"
	return e
}

// seesSession reports whether the caller may see session id: an admin
// every session (without reading it: the use case answers an unknown id),
// any other caller the sessions of its project. An unknown session is not
// seen, so that it and a session of another project earn the same answer.
func (a *App) seesSession(ctx context.Context, id string) (bool, error) {
	s := scopeOf(ctx)
	if s.all {
		return true, nil
	}
	project, err := a.store.SessionProject(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.sees(project), nil
}

// seenThrough answers hidden unless the caller may see session id: for a
// resource of its own id (an action, an artifact), reached through its
// session, hidden is the resource's unknown-id 404.
func (a *App) seenThrough(ctx context.Context, id string, hidden error) error {
	ok, err := a.seesSession(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return hidden
	}
	return nil
}

// visibleSession is what every method given a session id does first, after
// Allow: a session of another project is a 404 exactly like an unknown id
// (the engine's "session … not found"), so a key learns nothing of another
// project's sessions, not even that one exists. Everything derived from a
// session (its sub-agents and forks too) is in its project, so checking the
// session checks all that is reached through it.
func (a *App) visibleSession(ctx context.Context, id string) error {
	return a.seenThrough(ctx, id, apierror.NotFound("session %s not found", id))
}

// visibleStream is stream once the caller may see session id, and else a
// stream whose only value is visibleSession's 404: the check runs when the
// stream is read, before it opens, as the stream's own checks do.
func visibleStream[T any](ctx context.Context, a *App, id string, stream iter.Seq2[T, error]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		if err := a.visibleSession(ctx, id); err != nil {
			var zero T
			yield(zero, err)
			return
		}
		stream(yield)
	}
}

// visibleProject is the project whose agents, secrets or webhook endpoints
// a request by id or name may reach: "" (every project) for an admin, the
// caller's own otherwise; another project's answers 404, as one that does
// not exist.
func visibleProject(ctx context.Context) string {
	if s := scopeOf(ctx); !s.all {
		return s.project
	}
	return ""
}
