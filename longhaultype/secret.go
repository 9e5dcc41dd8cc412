package longhaultype

import (
	"fmt"
	"log/slog"
	"time"
)

// SecretInjection says how a vault secret is put into the HTTP requests of
// the http_request tool. Exactly one form is given:
//
//   - {"header": "X-Api-Key"}: the header carries the value; "format" may
//     wrap it, e.g. {"header": "Authorization", "format": "token {value}"}
//     ("{value}" is replaced by the value; default "{value}").
//   - {"bearer": true}: "Authorization: Bearer <value>".
//   - {"basic": {"username": "bot"}}: "Authorization: Basic
//     base64(username:value)", the value being the password.
//   - {"login": {"username": "bot"}}: a web site's login, the value being
//     the password: never put into a request by the server, only typed into
//     a login form of one of its hosts by the browser tool's login action.
//
// With bearer or basic, "header" may name another header than Authorization
// (e.g. Proxy-Authorization); "format" is not allowed. With login, neither
// is.
type SecretInjection struct {
	Header string           `json:"header,omitempty"`
	Format string           `json:"format,omitempty"`
	Bearer bool             `json:"bearer,omitempty"`
	Basic  *SecretBasicAuth `json:"basic,omitempty"`
	Login  *SecretLogin     `json:"login,omitempty"`
}

// SecretLogin is the user name of a web site's login (the browser tool's
// login action); the secret's value is the password.
type SecretLogin struct {
	Username string `json:"username"`
}

// SecretBasicAuth is the user name of HTTP basic authentication.
type SecretBasicAuth struct {
	Username string `json:"username"`
}

// PutSecretRequest is the body of PUT /v1/secrets/{name}.
type PutSecretRequest struct {
	// Value is the secret. No endpoint ever returns it.
	Value string `json:"value"`
	// Hosts are the host names the value may be sent to: exact names
	// ("api.github.com") or "*.example.com" for every subdomain.
	Hosts  []string         `json:"hosts"`
	Inject *SecretInjection `json:"inject"`
	// Project is the project whose sessions may use the secret (default
	// DefaultProject): secret names are unique within a project.
	Project string `json:"project,omitempty"`
}

// String hides the value, so that a request printed or logged by mistake
// does not show it.
func (r PutSecretRequest) String() string {
	return fmt.Sprintf("PutSecretRequest{Value: [hidden], Hosts: %q, Inject: %+v}", r.Hosts, r.Inject)
}

// GoString hides the value from %#v too.
func (r PutSecretRequest) GoString() string { return r.String() }

// LogValue hides the value from log/slog.
func (r PutSecretRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.String("value", "[hidden]"), slog.Any("hosts", r.Hosts))
}

// Secret is a vault secret's metadata: everything but its value.
type Secret struct {
	Project   string          `json:"project"`
	Name      string          `json:"name"`
	Hosts     []string        `json:"hosts"`
	Inject    SecretInjection `json:"inject"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}
