package vault

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
)

// This file holds the host bindings of secrets (and of the environment
// variables an operator allows for model keys): how a bound host is
// written, and whether a request's destination is one of them.
//
// A bound host is a DNS name, "*." and a DNS name of at least two labels
// (any subdomain, never the domain itself) or an IP address, each
// optionally with a port ("api.example.com:8443", "[::1]:8443"). Without a
// port it covers every port of the host; with one, only that port: a
// secret bound to a local service on 127.0.0.1:8443 does not go to
// whatever else listens on 127.0.0.1.

// normalizeHosts validates hosts and returns them in canonical form (lower
// case, no trailing dot, canonical IP addresses, IPv6 in brackets when a
// port follows).
func normalizeHosts(hosts []string) ([]string, error) {
	if len(hosts) == 0 {
		return nil, apierror.Invalid("hosts", "at least one host is required: a secret is only ever sent to the hosts it is bound to")
	}
	if len(hosts) > MaxHosts {
		return nil, apierror.Invalid("hosts", "at most %d hosts, got %d", MaxHosts, len(hosts))
	}
	out := make([]string, 0, len(hosts))
	for i, h := range hosts {
		field := fmt.Sprintf("hosts[%d]", i)
		n, err := NormalizeHost(h)
		if err != nil {
			return nil, apierror.Invalid(field, "host %s: %s", quote(h), err)
		}
		if slices.Contains(out, n) {
			return nil, apierror.Invalid(field, "host %s is listed twice", quote(h))
		}
		out = append(out, n)
	}
	return out, nil
}

var labelPattern = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$`)

// NormalizeHost validates one bound host (see the top of this file) and
// returns its canonical form, or an error saying what is wrong with it
// (without the host: callers quote it).
func NormalizeHost(h string) (string, error) {
	if strings.Contains(h, "://") || strings.ContainsAny(h, "/?#@") {
		return "", fmt.Errorf("give a host name, not a URL")
	}
	host, port, err := splitBound(h)
	if err != nil {
		return "", err
	}
	name, err := normalizeHostName(host)
	if err != nil {
		return "", err
	}
	if port == 0 {
		return name, nil
	}
	return net.JoinHostPort(name, strconv.Itoa(port)), nil
}

// splitBound splits a bound host into its host and port (0: none). A bare
// IPv6 address has no port; one with a port is written in brackets.
func splitBound(h string) (string, int, error) {
	if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
		return h, 0, nil
	}
	if !strings.Contains(h, ":") {
		return h, 0, nil
	}
	host, p, err := net.SplitHostPort(h)
	if err != nil {
		return "", 0, fmt.Errorf("give a host, or a host and a port as host:port ([addr]:port for IPv6)")
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("the port must be a number from 1 to 65535")
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("not a valid IP address")
	}
	return host, port, nil
}

// normalizeHostName validates and canonicalises a bound host without its
// port: a DNS name, a wildcard or an IP address.
func normalizeHostName(h string) (string, error) {
	if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
		return ip.String(), nil
	}
	if strings.ContainsAny(h, ":[]") {
		return "", fmt.Errorf("not a valid host name or IP address")
	}
	name := strings.TrimSuffix(strings.ToLower(h), ".")
	wildcard := false
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		wildcard, name = true, rest
	}
	if name == "" {
		return "", fmt.Errorf("empty host name")
	}
	if len(name) > 253 {
		return "", fmt.Errorf("a host name has at most 253 characters")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if !labelPattern.MatchString(l) {
			return "", fmt.Errorf("not a valid host name (letters, digits and hyphens in dot-separated labels; \"*.example.com\" for subdomains)")
		}
	}
	if wildcard {
		if len(labels) < 2 {
			return "", fmt.Errorf("a wildcard must cover a domain of at least two labels, like *.example.com")
		}
		return "*." + name, nil
	}
	return name, nil
}

// HostMatches reports whether a destination is one of the bound hosts
// (each in the canonical form NormalizeHost gives). dest is a host and a
// port ("api.example.com:443", "[::1]:8443"); a host without a port matches
// only the bindings that name no port, so a caller that does not know the
// port never gets a port-bound secret.
func HostMatches(bound []string, dest string) bool {
	host, port := canonicalDest(dest)
	for _, b := range bound {
		bhost, bport := b, 0
		if h, p, err := splitBound(b); err == nil {
			bhost, bport = strings.Trim(h, "[]"), p
		}
		if bport != 0 && bport != port {
			continue
		}
		if suffix, ok := strings.CutPrefix(bhost, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
			continue
		}
		if host == bhost {
			return true
		}
	}
	return false
}

// canonicalDest puts a destination's host in the form bound hosts have (no
// brackets, lower case, no trailing dot, canonical IP) and reads its port
// (0: none given).
func canonicalDest(dest string) (string, int) {
	host, port := dest, 0
	if h, p, err := net.SplitHostPort(dest); err == nil {
		host = h
		if n, err := strconv.Atoi(p); err == nil && n > 0 && n <= 65535 {
			port = n
		}
	}
	host = strings.Trim(host, "[]")
	if ip := net.ParseIP(host); ip != nil {
		return ip.String(), port
	}
	return strings.TrimSuffix(strings.ToLower(host), "."), port
}
