package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"strings"
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

// authorize applies the access rule of /v1/: with API keys configured, a
// valid "Authorization: Bearer <key>" (401 otherwise); with none, a loopback
// peer (403 otherwise). A server without keys is meant for one person on one
// machine; the serve command says so when it starts.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) error {
	if len(s.keys) == 0 {
		if isLoopback(r.RemoteAddr) {
			return nil
		}
		return forbidden("this server has no API keys configured and accepts requests from the local machine only")
	}
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="longhaul"`)
		return unauthorized("missing API key: send \"Authorization: Bearer <key>\"")
	}
	if !s.validKey(token) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="longhaul", error="invalid_token"`)
		return unauthorized("invalid API key")
	}
	return nil
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
