package app

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ProxyKeyIDPrefix starts the KeyID of a user a trusted reverse proxy
// signed in (single sign-on): "sso:" and the user's name. A stored key's id
// starts "key_" and the built-in callers have none, so the actor on a
// decision says both who decided and that the proxy vouched for them, and
// a person can never be taken for a key of the same name.
const ProxyKeyIDPrefix = "sso:"

// ProxyUser is an identity the operator gives a user that a trusted
// reverse proxy authenticates (serve --trusted-proxy-header and the config
// file's users): the proxy says who the person is, this says what they may
// do and where.
type ProxyUser struct {
	// Name is the user as the proxy names them (an e-mail address, a
	// login), matched without regard to case.
	Name string
	Role lt.Role
	// Project is the project the user works in. Default: "" (every
	// project) for an admin, lt.DefaultProject for any other role.
	Project string
}

// checkCallerName checks the name of a key or of a user a proxy signs
// in, as the actor on decisions shows it (a 400 naming name): a policy's
// approvers and not_creator compare names exactly, so "alice " must not
// pass for another person than "alice", nor a key pass for a built-in
// caller.
func checkCallerName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return apierror.Invalid("name", "name is required")
	case name != strings.TrimSpace(name):
		return apierror.Invalid("name", "name must not start or end with spaces, got %q", name)
	case !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxKeyName:
		return apierror.Invalid("name", "name must be valid UTF-8 of at most %d characters", MaxKeyName)
	case strings.ContainsFunc(name, unicode.IsControl) || strings.Contains(name, ","):
		// A comma is how HTTP joins repeated header values: a user's name
		// with one could be a proxy's value merged with a client's.
		return apierror.Invalid("name", "name must not contain control characters or commas, got %q", name)
	case slices.ContainsFunc(builtinCallerNames, func(n string) bool { return strings.EqualFold(n, name) }):
		return apierror.Invalid("name", "name %q is the name of a built-in caller (%s): choose another", name, strings.Join(builtinCallerNames, ", "))
	}
	return nil
}

// builtinCallerNames are the names of the callers that are not a stored
// key or a person: a user of the same name would read as one of them in a
// list of actors.
var builtinCallerNames = []string{BootstrapCaller.Name, LocalCaller.Name, LibraryCaller.Name, ConfigCaller.Name}

// Check returns u with its default project, or a 400 naming the field at
// fault ("name", "role" or "project").
func (u ProxyUser) Check() (ProxyUser, error) {
	if err := checkCallerName(u.Name); err != nil {
		return u, err
	}
	if !slices.Contains(lt.Roles(), u.Role) {
		return u, apierror.Invalid("role", "role must be one of %s, got %q", roleNames(), u.Role)
	}
	if u.Project == "" && u.Role != lt.RoleAdmin {
		u.Project = lt.DefaultProject
	}
	if u.Project != "" {
		if err := checkProjectName(u.Project); err != nil {
			return u, err
		}
	}
	return u, nil
}

// Caller is who a request the proxy vouched for as u calls as.
func (u ProxyUser) Caller() Caller {
	return Caller{KeyID: ProxyKeyIDPrefix + u.Name, Name: u.Name, Role: u.Role, Project: u.Project}
}
