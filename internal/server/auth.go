package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/app"
)

// hashKeys returns the SHA-256 of each key. Comparing digests makes every
// comparison the same length, so its time says nothing about a key's length.
func hashKeys(keys []string) [][32]byte {
	out := make([][32]byte, len(keys))
	for i, k := range keys {
		out[i] = sha256.Sum256([]byte(k))
	}
	return out
}

// KeyAuthenticator finds the caller a stored API key's token names
// (app.App's Authenticate): app.ErrInvalidKey for an unknown, revoked or
// expired key, any other error for a failure to look it up.
type KeyAuthenticator interface {
	Authenticate(ctx context.Context, token string) (app.Caller, error)
}

// authorize applies the access rule of /v1/ and returns who calls. A
// request from a trusted proxy (Config.TrustedProxyHeader, sso.go) with no
// bearer token is the user the proxy names, when it names one. Otherwise,
// with API keys configured (Config.APIKeys, the bootstrap keys): a valid
// "Authorization: Bearer <key>", a bootstrap key (an admin named
// "bootstrap") or a key of the store (its name, role and project), 401
// otherwise. With none: a loopback peer, as the key its bearer token names
// when it names a stored one, else as an admin named "local"; 403 for any
// other peer. A server without keys is meant for one person on one
// machine; the serve command says so when it starts. A trusted proxy is
// never that person, even on loopback: it forwards everyone's requests.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) (app.Caller, error) {
	token, hasToken := bearerToken(r.Header.Get("Authorization"))
	proxied := s.fromTrustedProxy(r)
	if proxied && !hasToken {
		if c, named, err := s.proxyCaller(r); named {
			return c, err
		}
	}
	if len(s.keys) == 0 {
		if !isLoopback(r.RemoteAddr) && !proxied {
			return app.Caller{}, forbidden("this server has no API keys configured and accepts requests from the local machine only")
		}
		if hasToken && s.cfg.Keys != nil {
			// A local user may act as a stored key (to try its role); a
			// token that names none is ignored, as it always was here.
			c, err := s.cfg.Keys.Authenticate(r.Context(), token)
			if err == nil {
				return c, nil
			}
			if !errors.Is(err, app.ErrInvalidKey) {
				return app.Caller{}, err
			}
		}
		if proxied {
			return app.Caller{}, forbidden(fmt.Sprintf("a request through the trusted proxy must name its user in the %s header "+
				"or carry a valid stored API key: this server has no API keys configured", s.cfg.TrustedProxyHeader))
		}
		return app.LocalCaller, nil
	}
	if !hasToken {
		w.Header().Set("WWW-Authenticate", `Bearer realm="longhaul"`)
		return app.Caller{}, unauthorized("missing API key: send \"Authorization: Bearer <key>\"")
	}
	if s.validKey(token) {
		return app.BootstrapCaller, nil
	}
	if s.cfg.Keys != nil {
		c, err := s.cfg.Keys.Authenticate(r.Context(), token)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, app.ErrInvalidKey) {
			return app.Caller{}, err
		}
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="longhaul", error="invalid_token"`)
	return app.Caller{}, unauthorized("invalid API key")
}

// validKey compares token with every configured key in constant time, and
// never stops early, so timing reveals neither which key matched nor how
// much of one.
func (s *Server) validKey(token string) bool {
	sum := sha256.Sum256([]byte(token))
	match := 0
	for i := range s.keys {
		match |= subtle.ConstantTimeCompare(sum[:], s.keys[i][:])
	}
	return match == 1
}

// bearerToken extracts the token of an "Authorization: Bearer <token>"
// header (the scheme is case-insensitive, RFC 9110 §11.1).
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// isLoopback reports whether remoteAddr ("host:port", as net/http sets
// Request.RemoteAddr) is in 127.0.0.0/8 or is ::1 (IPv4-mapped forms
// included). Anything unparsable is not loopback.
func isLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return addr.Unmap().IsLoopback()
}
