package egress

import "fmt"

// NewPublicPolicy builds a policy for requests the server itself makes to
// addresses that users supply (outgoing webhooks): every host name and every
// public address is allowed, while private, loopback, link-local, metadata
// and the other refused classes stay refused unless allowPrivate lists the
// address literally (as for NewPolicy, e.g. "127.0.0.1" in tests). The
// rebinding rule applies unchanged: a name that resolves to a refused
// address is refused.
func NewPublicPolicy(allowPrivate []string) (*Policy, error) {
	p, err := NewPolicy(nil)
	if err != nil {
		return nil, err
	}
	for i, entry := range allowPrivate {
		if err := p.add(entry); err != nil {
			return nil, fmt.Errorf("allow private[%d] %q: %w", i, entry, err)
		}
	}
	p.anyHost = true
	return p, nil
}
