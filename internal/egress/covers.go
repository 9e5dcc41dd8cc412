package egress

import (
	"net/netip"
	"strings"
)

// Covers reports whether every destination that an allowlist entry allows
// (NewPolicy's syntax) is allowed by p too, whatever the names resolve to:
// an exact name is covered by the same name or by a wildcard above it, a
// wildcard "*.a.example.com" by the same wildcard or one above it
// ("*.example.com"), and an IP literal only by the same literal (a listed
// name never covers an address: the address would be reached without the
// name's checks). An entry that is not valid covers nothing and is not
// covered. It is how a sub-agent's allowlist is checked against its
// parent's: a child may list only what its parent's list already allows.
func (p *Policy) Covers(entry string) bool {
	q := &Policy{names: make(map[string]bool), addrs: make(map[netip.Addr]bool)}
	if err := q.add(entry); err != nil {
		return false
	}
	for a := range q.addrs {
		if p.addrs[a] {
			return true
		}
		// A public policy allows public addresses unlisted; the refused
		// classes only when listed, as Dial decides.
		return p.anyHost && addressClass(a) == ""
	}
	if p.anyHost {
		return true
	}
	for name := range q.names {
		return p.nameListed(name)
	}
	for _, s := range q.suffixes {
		// Every name under s is under a parent wildcard t when s is t
		// itself or a subdomain of t's domain.
		for _, t := range p.suffixes {
			if strings.HasSuffix(s, t) {
				return true
			}
		}
	}
	return false
}
