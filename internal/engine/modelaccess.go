package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/vault"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// This file decides where a model's credential may go. A key is the
// server's, not the caller's: an API client that may create sessions must
// not be able to send a vault secret or an environment variable of the
// server to a host of its choosing. So:
//
//   - api_key_secret goes only to the secret's hosts (the vault's binding,
//     port included when the binding names one);
//   - api_key_env names only variables the operator allowed for model keys
//     (Config.ModelKeyEnv), each with the hosts its key may go to;
//   - the host is the one the model's calls go to: its base_url, or the
//     provider's own API (model.Endpoint) when it gives none;
//   - and a model's base_url is never the server's own control plane.
//
// Each rule is checked when an agent is defined or a session created (a
// 400 naming the field) and again before every model call, from the
// vault's row of now: an agent stored under an older allowlist, or a
// secret whose hosts changed since, sends nothing.

// DefaultModelKeyEnv is the allowlist of Config.ModelKeyEnv when none is
// given: each provider's conventional variable, for its own API only.
func DefaultModelKeyEnv() map[string][]string {
	return map[string][]string{
		"OPENAI_API_KEY":    {"api.openai.com"},
		"ANTHROPIC_API_KEY": {"api.anthropic.com"},
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// reservedEnvPrefix names the server's own configuration variables
// (LONGHAUL_API_KEYS, LONGHAUL_VAULT_KEY, LONGHAUL_STORE...): never a model
// key, whatever an operator lists.
const reservedEnvPrefix = "LONGHAUL_"

// normalizeModelKeyEnv validates the allowlist and puts its hosts in the
// vault's canonical form.
func normalizeModelKeyEnv(in map[string][]string) (map[string][]string, error) {
	out := make(map[string][]string, len(in))
	for name, hosts := range in {
		switch {
		case !envName.MatchString(name):
			return nil, fmt.Errorf("engine config: ModelKeyEnv: %q is not an environment variable name", name)
		case strings.HasPrefix(strings.ToUpper(name), reservedEnvPrefix):
			return nil, fmt.Errorf("engine config: ModelKeyEnv: %s is the server's own configuration, never a model key", name)
		case len(hosts) == 0:
			return nil, fmt.Errorf("engine config: ModelKeyEnv[%s]: at least one host is required", name)
		}
		norm := make([]string, 0, len(hosts))
		for _, h := range hosts {
			n, err := vault.NormalizeHost(h)
			if err != nil {
				return nil, fmt.Errorf("engine config: ModelKeyEnv[%s]: host %q: %v", name, h, err)
			}
			if !slices.Contains(norm, n) {
				norm = append(norm, n)
			}
		}
		out[name] = norm
	}
	return out, nil
}

// modelTarget is where a model's calls go: the URL, and its host and port
// as a key's binding is matched against ("api.openai.com:443"). ok is false
// when the spec gives no base_url and the provider names no API of its own.
type modelTarget struct {
	url  *url.URL
	host string
	port int
}

func (t modelTarget) dest() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

// cleartext reports why a key may not go to t: over plain http to a host
// that is not this machine's, anyone on the path reads it. "" when it may.
func (t modelTarget) cleartext() string {
	if t.url == nil || t.url.Scheme != "http" {
		return ""
	}
	if t.host == "localhost" {
		return ""
	}
	if ip := net.ParseIP(t.host); ip != nil && ip.IsLoopback() {
		return ""
	}
	return "a model key is sent only over https (or plain http to this machine's loopback), never in clear text to " + t.host
}

func (e *Engine) modelTarget(m lt.ModelSpec) (modelTarget, bool) {
	raw := m.BaseURL
	if raw == "" {
		if ep, ok := e.cfg.Providers[m.Provider].(model.Endpoint); ok {
			raw = ep.DefaultBaseURL(m)
		}
	}
	if raw == "" {
		return modelTarget{}, false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return modelTarget{}, false
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return modelTarget{}, false
		}
		port = n
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	return modelTarget{url: u, host: host, port: port}, true
}

// notAllowedEnv is the one message for an api_key_env the operator did not
// allow, whether or not the server has such a variable: the answer must not
// tell a caller which variables exist. The name is not echoed either: it
// may be a key pasted in the wrong field.
const notAllowedEnv = "names no environment variable this server allows for model keys (an operator allows one with serve --model-key-env NAME=HOST[,HOST])"

// validateModelAccess checks where the model's calls and its key go (see
// the top of this file); errors name the field under prefix
// ("agent_spec.model").
func (e *Engine) validateModelAccess(ctx context.Context, project string, m lt.ModelSpec, prefix string) error {
	target, hasTarget := e.modelTarget(m)
	if m.BaseURL != "" && hasTarget {
		if reason := e.cfg.ControlPlane.Check(ctx, target.host, target.port); reason != "" {
			return apierror.Invalid(prefix+".base_url", "%s", reason)
		}
	}
	if m.APIKeySecret != "" {
		field := prefix + ".api_key_secret"
		if m.APIKeyEnv != "" {
			return apierror.Invalid(field, "give api_key_env or api_key_secret, not both")
		}
		if e.cfg.Vault == nil {
			return apierror.Invalid(field, "this server has no vault")
		}
		if !hasTarget {
			return apierror.Invalid(field, "a key goes only to its secret's hosts, and provider %s names no host without base_url", m.Provider)
		}
		if err := e.cfg.Vault.CheckBound(ctx, project, m.APIKeySecret, target.dest()); err != nil {
			if msg, ok := secretRefusal(err); ok {
				return apierror.Invalid(field, "%s", msg)
			}
			return err
		}
		if why := target.cleartext(); why != "" {
			return apierror.Invalid(prefix+".base_url", "%s", why)
		}
		return nil
	}
	if m.APIKeyEnv == "" {
		return nil
	}
	field := prefix + ".api_key_env"
	if !envName.MatchString(m.APIKeyEnv) {
		return apierror.Invalid(field, "must be the name of an environment variable (letters, digits and _), not a key")
	}
	hosts, allowed := e.cfg.ModelKeyEnv[m.APIKeyEnv]
	if !allowed {
		return apierror.Invalid(field, notAllowedEnv)
	}
	if !hasTarget {
		return apierror.Invalid(field, "the key in %s goes only to %s, and provider %s names no host without base_url", m.APIKeyEnv, strings.Join(hosts, ", "), m.Provider)
	}
	if !vault.HostMatches(hosts, target.dest()) {
		return apierror.Invalid(field, "the key in %s goes only to %s, not to %s (the model's host)", m.APIKeyEnv, strings.Join(hosts, ", "), target.dest())
	}
	if why := target.cleartext(); why != "" {
		return apierror.Invalid(prefix+".base_url", "%s", why)
	}
	if _, ok := e.cfg.LookupEnv(m.APIKeyEnv); !ok {
		return apierror.Invalid(field, "environment variable %s is not set on this server", m.APIKeyEnv)
	}
	return nil
}

// secretRefusal is the message of a vault error that refuses a secret (an
// unknown name, a destination it is not bound to), or false for another
// error (storage).
func secretRefusal(err error) (string, bool) {
	var unknown interface{ UnknownSecret() string }
	var notBound interface{ NotBound() string }
	var loginOnly interface{ LoginOnly() string }
	if errors.As(err, &unknown) || errors.As(err, &notBound) || errors.As(err, &loginOnly) {
		return err.Error(), true
	}
	return "", false
}

// modelAccess returns the key of model m (the session's, or its model
// monitor's) for its call now,
// checked again against the rules above: the vault's binding of now, the
// operator's allowlist of now, the control plane of now. A refusal is a
// *model.Error (not retryable): the call is not made and nothing is sent.
// The key goes to the provider only, never into the journal, an event or a
// log.
func (r *runner) modelAccess(ctx context.Context, m lt.ModelSpec) (string, error) {
	target, hasTarget := r.e.modelTarget(m)
	if m.BaseURL != "" && hasTarget {
		if reason := r.e.cfg.ControlPlane.Check(ctx, target.host, target.port); reason != "" {
			return "", &model.Error{Kind: model.KindBadRequest, Message: "base_url: " + reason}
		}
	}
	refuse := func(format string, args ...any) (string, error) {
		return "", &model.Error{Kind: model.KindAuth, Message: "model key not sent: " + fmt.Sprintf(format, args...)}
	}
	switch {
	case m.APIKeySecret != "":
		if r.e.cfg.Vault == nil {
			return refuse("api_key_secret: this server has no vault")
		}
		if !hasTarget {
			return refuse("api_key_secret: provider %s names no host without base_url", m.Provider)
		}
		if why := target.cleartext(); why != "" {
			return refuse("base_url: %s", why)
		}
		v, err := r.e.cfg.Vault.ValueFor(ctx, r.project, m.APIKeySecret, target.dest())
		if err != nil {
			if msg, ok := secretRefusal(err); ok {
				return refuse("api_key_secret: %s", msg)
			}
			// Storage: the next attempt may read it.
			return "", &model.Error{Kind: model.KindServer, Message: "read the model key from the vault: " + err.Error()}
		}
		return v, nil
	case m.APIKeyEnv != "":
		hosts, allowed := r.e.cfg.ModelKeyEnv[m.APIKeyEnv]
		switch {
		case !allowed:
			return refuse("api_key_env %s", notAllowedEnv)
		case !hasTarget:
			return refuse("api_key_env: provider %s names no host without base_url", m.Provider)
		case !vault.HostMatches(hosts, target.dest()):
			return refuse("api_key_env: the key in %s goes only to %s, not to %s", m.APIKeyEnv, strings.Join(hosts, ", "), target.dest())
		case target.cleartext() != "":
			return refuse("base_url: %s", target.cleartext())
		}
		v, _ := r.e.cfg.LookupEnv(m.APIKeyEnv)
		return v, nil
	}
	return "", nil
}
