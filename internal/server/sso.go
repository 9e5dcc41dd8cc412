package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
)

// Single sign-on behind a reverse proxy (Config.TrustedProxyHeader): a
// proxy such as oauth2-proxy signs the user in with the team's identity
// provider and forwards each request with the user's name in a header;
// the operator's config file maps that name to a role and a project
// (Config.ProxyUsers). Longhaul does no OAuth itself.
//
// The header is a credential only when the proxy set it, so it is believed
// only from a TCP peer inside Config.TrustedProxies: the connection's own
// address, never X-Forwarded-For or anything else a client writes. From
// any other peer it is ignored, and the request authenticates exactly as
// it would without it. The proxy must remove the header from what clients
// send (oauth2-proxy does for the headers it sets).
//
// A bearer key wins over the header: a request that carries
// "Authorization: Bearer <key>" is that key (or a 401), whoever forwarded
// it. The key is the request's own, explicit credential (a script or the
// CLI going through the same proxy as the browsers), while the header
// describes the proxy's sign-in; a key that does not work is refused
// rather than quietly replaced by the signed-in user, so that a client
// never acts with other powers than those it chose.

// forbiddenProxyHeaders are headers that already mean something to this
// server or to HTTP: naming one as TrustedProxyHeader is a mistake.
var forbiddenProxyHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", "Host",
	"Content-Type", "Content-Length", "Origin", "Connection", "Idempotency-Key"}

// validateProxy checks the single sign-on fields of c: all or none, a
// header name that is a valid HTTP field name with no other meaning here,
// valid networks, and valid users, unique regardless of case.
func (c *Config) validateProxy() error {
	if c.TrustedProxyHeader == "" {
		if len(c.TrustedProxies) > 0 {
			return errors.New("TrustedProxies is set without TrustedProxyHeader: say which header names the user")
		}
		if len(c.ProxyUsers) > 0 {
			return errors.New("ProxyUsers is set without TrustedProxyHeader: say which header names the user")
		}
		return nil
	}
	if !validHeaderName(c.TrustedProxyHeader) {
		return fmt.Errorf("TrustedProxyHeader %q is not a valid header name (letters, digits and -)", c.TrustedProxyHeader)
	}
	for _, h := range forbiddenProxyHeaders {
		if strings.EqualFold(h, c.TrustedProxyHeader) {
			return fmt.Errorf("TrustedProxyHeader %q already means something else: use a header of its own, such as X-Forwarded-User", c.TrustedProxyHeader)
		}
	}
	if len(c.TrustedProxies) == 0 {
		return errors.New("TrustedProxyHeader is set without TrustedProxies: say which networks the proxy connects from")
	}
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			return fmt.Errorf("TrustedProxies[%d] is not a valid network", i)
		}
	}
	if len(c.ProxyUsers) == 0 {
		return errors.New("TrustedProxyHeader is set without ProxyUsers: every user would be refused")
	}
	seen := make(map[string]int, len(c.ProxyUsers))
	for i, u := range c.ProxyUsers {
		if _, err := u.Check(); err != nil {
			var ae *apierror.Error
			if errors.As(err, &ae) && ae.Field != "" {
				return fmt.Errorf("ProxyUsers[%d].%s: %s", i, ae.Field, ae.Message)
			}
			return fmt.Errorf("ProxyUsers[%d]: %w", i, err)
		}
		key := strings.ToLower(u.Name)
		if j, dup := seen[key]; dup {
			return fmt.Errorf("ProxyUsers[%d]: the user %q is already ProxyUsers[%d] (names are compared regardless of case)", i, u.Name, j)
		}
		seen[key] = i
	}
	return nil
}

// validHeaderName reports whether name is an HTTP field name made of
// letters, digits and '-' (the names proxies use; RFC 9110 allows a few
// more symbols no proxy's user header has).
func validHeaderName(name string) bool {
	if name == "" || name[0] == '-' {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// proxyCallers indexes users (already validated) by lower-cased name.
func proxyCallers(users []app.ProxyUser) map[string]app.Caller {
	out := make(map[string]app.Caller, len(users))
	for _, u := range users {
		checked, _ := u.Check() // Validate has refused any error
		out[strings.ToLower(checked.Name)] = checked.Caller()
	}
	return out
}

// fromTrustedProxy reports whether r's TCP peer is in
// Config.TrustedProxies (false when single sign-on is off).
func (s *Server) fromTrustedProxy(r *http.Request) bool {
	if s.cfg.TrustedProxyHeader == "" {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap().WithZone("")
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// proxyCaller returns who a request from a trusted proxy calls as, by the
// user its TrustedProxyHeader names. named is false when it names none
// (no header, or an empty one): then the request authenticates as it would
// without a proxy. A user the config does not list is a 403 that does not
// list the users either.
func (s *Server) proxyCaller(r *http.Request) (c app.Caller, named bool, err error) {
	header := textproto.CanonicalMIMEHeaderKey(s.cfg.TrustedProxyHeader)
	values := r.Header.Values(header)
	if len(values) > 1 {
		// A proxy that adds its header after the client's instead of
		// replacing it: whichever value were believed, the client might
		// have chosen it.
		return app.Caller{}, true, forbidden(fmt.Sprintf("the request carries the %s header %d times: "+
			"the proxy must replace the header a client sends, not add to it", header, len(values)))
	}
	if len(values) == 0 || strings.TrimSpace(values[0]) == "" {
		return app.Caller{}, false, nil
	}
	name := strings.TrimSpace(values[0])
	c, ok := s.proxyUsers[strings.ToLower(name)]
	if !ok {
		return app.Caller{}, true, forbidden(fmt.Sprintf("the user %s that the proxy signed in (%s) has no identity on this server: "+
			"ask its operator to add the user to the config file's users", quoteField(name), header))
	}
	return c, true, nil
}
