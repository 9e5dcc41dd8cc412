package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of Config.
const (
	// DefaultDialTimeout bounds one TCP connection attempt of the default
	// dialer.
	DefaultDialTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a proxied connection or tunnel on which
	// nothing moved for this long.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultMaxHeaderBytes bounds the request header a sandbox sends the
	// proxy, and the response header a remote server sends back.
	DefaultMaxHeaderBytes = 64 << 10
)

// DefaultPorts are the destination ports allowed when Config.Ports is empty.
var DefaultPorts = []int{80, 443}

// Resolver looks host names up; *net.Resolver implements it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Dialer opens connections; *net.Dialer implements it. Policy hands it an
// IP address and port, never a name.
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Config is how a Policy reaches the network and how the proxy bounds its
// connections. The zero value is ready to use.
type Config struct {
	// Resolver answers for listed names (default net.DefaultResolver).
	Resolver Resolver
	// Dialer connects to checked addresses (default a net.Dialer with
	// DefaultDialTimeout).
	Dialer Dialer
	// Ports are the allowed destination ports (default DefaultPorts).
	Ports []int
	// IdleTimeout closes a proxy connection or tunnel idle for this long,
	// and bounds how long the proxy waits for a response header (default
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds request and response headers at the proxy
	// (default DefaultMaxHeaderBytes).
	MaxHeaderBytes int
	// Logger receives the proxy's internal errors (default: discarded).
	// Decisions go to the onEvent callback, not here.
	Logger *slog.Logger
	// ControlPlane holds the server's own addresses, refused whatever the
	// allowlist says (default: none).
	ControlPlane *ControlPlane
}

// validate names the offending field.
func (c *Config) validate() error {
	for i, p := range c.Ports {
		if p < 1 || p > 65535 {
			return fmt.Errorf("egress config: Ports[%d]: %d is not a port number (1-65535)", i, p)
		}
	}
	if c.IdleTimeout < 0 {
		return fmt.Errorf("egress config: IdleTimeout: must not be negative, got %s", c.IdleTimeout)
	}
	if c.MaxHeaderBytes < 0 {
		return fmt.Errorf("egress config: MaxHeaderBytes: must not be negative, got %d", c.MaxHeaderBytes)
	}
	return nil
}

func (c *Config) idleTimeout() time.Duration {
	if c.IdleTimeout > 0 {
		return c.IdleTimeout
	}
	return DefaultIdleTimeout
}

func (c *Config) maxHeaderBytes() int {
	if c.MaxHeaderBytes > 0 {
		return c.MaxHeaderBytes
	}
	return DefaultMaxHeaderBytes
}

func (c *Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Event is one connection decision. It has exactly the fields of
// tool.NetworkEvent and converts to it with tool.NetworkEvent(ev).
type Event struct {
	// Via is "proxy" (from the sandbox) or "http_request"; Dial leaves it
	// empty for its caller to fill in.
	Via  string `json:"via"`
	Host string `json:"host"`
	Port int    `json:"port"`
	// Address is the IP dialled, when the policy allowed the connection.
	Address string `json:"address,omitempty"`
	// Allowed is the policy's decision.
	Allowed bool `json:"allowed"`
	// Reason says why the destination was refused or, when it was allowed,
	// why the connection then failed.
	Reason string `json:"reason,omitempty"`
}

// RefusedError is the error of a connection the policy refused.
type RefusedError struct {
	Host   string
	Port   int
	Reason string
}

func (e *RefusedError) Error() string {
	return "connection to " + net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) + " refused: " + e.Reason
}

// Policy decides which destinations are allowed. Build it with NewPolicy;
// the zero value refuses everything. It is immutable and safe for concurrent
// use.
type Policy struct {
	names    map[string]bool     // exact host names
	suffixes []string            // ".example.com" for "*.example.com"
	addrs    map[netip.Addr]bool // listed IP literals, canonical
	// anyHost allows every host name and every public address (see
	// NewPublicPolicy); refused address classes still need a listing.
	anyHost  bool
	ports    []int
	resolver Resolver
	dialer   Dialer
	control  *ControlPlane
}

// NewPolicy builds a policy from an allowlist (tool.NetworkPolicy.Allow) with
// the default Config. Entries are exact host names, "*.example.com"
// (subdomains only) or IP literals; host names are compared without case or a
// trailing dot. An invalid entry is an error naming it.
func NewPolicy(allow []string) (*Policy, error) {
	p := &Policy{names: make(map[string]bool), addrs: make(map[netip.Addr]bool)}
	for i, entry := range allow {
		if err := p.add(entry); err != nil {
			return nil, fmt.Errorf("network allow[%d] %q: %w", i, entry, err)
		}
	}
	return p.WithConfig(Config{})
}

// WithConfig returns a copy of p that resolves, dials and checks ports as cfg
// says. An invalid cfg is an error naming the field.
func (p *Policy) WithConfig(cfg Config) (*Policy, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	q := *p
	q.resolver = cfg.Resolver
	if q.resolver == nil {
		q.resolver = net.DefaultResolver
	}
	q.dialer = cfg.Dialer
	if q.dialer == nil {
		q.dialer = &net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second}
	}
	if cfg.ControlPlane != nil {
		// Never dropped by a later WithConfig that does not repeat it: a
		// policy that refuses the control plane keeps refusing it.
		q.control = cfg.ControlPlane
	}
	q.ports = slices.Clone(cfg.Ports)
	if len(q.ports) == 0 {
		q.ports = slices.Clone(DefaultPorts)
	}
	return &q, nil
}

func (p *Policy) add(entry string) error {
	switch {
	case entry == "":
		return errors.New("is empty")
	case strings.TrimSpace(entry) != entry:
		return errors.New("has leading or trailing space")
	case strings.Contains(entry, "://"):
		return errors.New(`must be a host name, not a URL (write "api.example.com")`)
	case strings.Contains(entry, "/"):
		return errors.New("must be a host name or an IP address (address ranges are not supported)")
	}
	lit := entry
	if strings.HasPrefix(lit, "[") && strings.HasSuffix(lit, "]") {
		lit = lit[1 : len(lit)-1]
	}
	if a, err := netip.ParseAddr(lit); err == nil {
		if a.Zone() != "" {
			return errors.New("must not have a zone")
		}
		p.addrs[canonicalAddr(a)] = true
		return nil
	}
	if strings.ContainsAny(entry, "[]") {
		return errors.New("is not a valid IP address")
	}
	if strings.Contains(entry, ":") {
		return errors.New("must not have a port (ports are configured by the server)")
	}
	if rest, ok := strings.CutPrefix(entry, "*."); ok {
		name := normalizeName(rest)
		if err := checkName(name); err != nil {
			return err
		}
		if !strings.Contains(name, ".") {
			return errors.New(`a wildcard needs at least two labels after "*." (like "*.example.com")`)
		}
		p.suffixes = append(p.suffixes, "."+name)
		return nil
	}
	if strings.Contains(entry, "*") {
		return errors.New(`a wildcard must be a leading "*." (like "*.example.com")`)
	}
	name := normalizeName(entry)
	if err := checkName(name); err != nil {
		return err
	}
	p.names[name] = true
	return nil
}

// normalizeName lowercases an ASCII host name and drops one trailing dot
// (the fully qualified form names the same host).
func normalizeName(s string) string {
	return strings.ToLower(strings.TrimSuffix(s, "."))
}

// checkName accepts DNS host names: ASCII labels of letters, digits, '-' and
// '_' (used by some service names), 1-63 bytes each, 253 in all.
func checkName(name string) error {
	if name == "" {
		return errors.New("is not a host name")
	}
	if len(name) > 253 {
		return fmt.Errorf("is %d bytes long; a host name has at most 253", len(name))
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return errors.New("has an empty label")
		}
		if len(l) > 63 {
			return errors.New("has a label longer than 63 bytes")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c >= 0x80:
				return errors.New("must be ASCII (write an international name in its xn-- form)")
			default:
				return fmt.Errorf("has an invalid character %q", c)
			}
		}
	}
	// "127.1" or "0x7f.1" are not IP literals to netip but are to some
	// resolvers; a real name never ends in an all-numeric label.
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return errors.New("looks like an IP address but is not one")
	}
	return nil
}

// nameListed reports whether name (normalized) is listed exactly or under a
// wildcard.
func (p *Policy) nameListed(name string) bool {
	if p.names[name] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// Dial connects to host:port if the policy allows it. network is "tcp",
// "tcp4" or "tcp6". A host name must be listed; it is resolved once with the
// resolver and every answer is checked: one refused address (private,
// loopback, metadata…, unless listed literally) refuses the whole
// connection, since an attacker's DNS could otherwise rebind a listed name to
// it. The connection goes to a checked IP, never to the name, so nothing
// re-resolves between the check and the dial. An IP literal must be listed
// itself.
//
// The Event describes the decision whatever happens (Via is left for the
// caller). A refusal is a *RefusedError; a lookup or connection failure is
// another error.
func (p *Policy) Dial(ctx context.Context, network, host string, port int) (net.Conn, Event, error) {
	ev := Event{Host: host, Port: port}
	refuse := func(reason string) (net.Conn, Event, error) {
		ev.Reason = reason
		return nil, ev, &RefusedError{Host: ev.Host, Port: port, Reason: reason}
	}
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return refuse(fmt.Sprintf("network %q is not supported", network))
	}

	st := p.static(host, port)
	ev.Host = st.host
	if st.reason != "" {
		return refuse(st.reason)
	}
	if p.resolver == nil || p.dialer == nil {
		return refuse("policy was not built with NewPolicy")
	}

	var candidates []netip.Addr
	if st.literal.IsValid() {
		candidates = []netip.Addr{st.literal}
	} else {
		answers, err := p.resolver.LookupIPAddr(ctx, ev.Host)
		if err != nil {
			ev.Reason = "resolve: " + err.Error()
			return nil, ev, fmt.Errorf("resolve %s: %w", ev.Host, err)
		}
		for _, ans := range answers {
			a, ok := netip.AddrFromSlice(ans.IP)
			if !ok {
				return refuse(fmt.Sprintf("resolves to an invalid address %q", ans.IP))
			}
			a = canonicalAddr(a)
			if class := addressClass(a); class != "" && !p.addrs[a] {
				return refuse(fmt.Sprintf("resolves to %s (%s)", a, class))
			}
			if !slices.Contains(candidates, a) {
				candidates = append(candidates, a)
			}
		}
		if len(candidates) == 0 {
			return refuse("resolves to no address")
		}
	}
	// After the allowlist, whatever it lists: the server's own addresses.
	for _, a := range candidates {
		if reason := p.control.check(ctx, p.resolver, a, port); reason != "" {
			return refuse(reason)
		}
	}
	candidates = slices.DeleteFunc(candidates, func(a netip.Addr) bool {
		return (network == "tcp4" && !a.Is4()) || (network == "tcp6" && !a.Is6())
	})
	if len(candidates) == 0 {
		family := "IPv4"
		if network == "tcp6" {
			family = "IPv6"
		}
		return refuse("has no " + family + " address")
	}

	ev.Allowed = true
	var lastErr error
	for _, a := range candidates {
		ev.Address = a.String()
		conn, err := p.dialer.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, ev, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	ev.Reason = "connect: " + lastErr.Error()
	return nil, ev, fmt.Errorf("connect to %s: %w", net.JoinHostPort(ev.Host, strconv.Itoa(port)), lastErr)
}

// staticCheck is what Dial decides before any lookup.
type staticCheck struct {
	// host is the host as events show it: a literal's canonical form or
	// the normalized name.
	host string
	// literal is the canonical address when host is an IP literal (the
	// zero Addr for a name).
	literal netip.Addr
	// reason refuses the connection ("" when nothing refuses it yet).
	reason string
}

// static checks the port, and an IP literal's or a name's own standing in
// the allowlist: everything but what a lookup and the server's own
// addresses tell.
func (p *Policy) static(host string, port int) staticCheck {
	var c staticCheck
	lit := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	addr, err := netip.ParseAddr(lit)
	isLiteral := err == nil
	if isLiteral {
		c.host = addr.String()
		if addr.Zone() != "" {
			c.reason = "an IP address with a zone is not allowed"
			return c
		}
	} else {
		c.host = normalizeName(host)
	}
	ports := p.ports
	if len(ports) == 0 {
		ports = DefaultPorts
	}
	if !slices.Contains(ports, port) {
		c.reason = fmt.Sprintf("port %d is not allowed (allowed: %s)", port, joinInts(ports))
		return c
	}
	if isLiteral {
		// A listed literal is allowed whatever its class: listing a private
		// address is the operator's explicit opt-in.
		a := canonicalAddr(addr)
		if !p.addrs[a] {
			if !p.anyHost {
				c.reason = "IP address is not in the allowlist"
				return c
			}
			if class := addressClass(a); class != "" {
				c.reason = fmt.Sprintf("%s is a %s address", a, class)
				return c
			}
		}
		c.literal = a
		return c
	}
	if err := checkName(c.host); err != nil {
		c.reason = "invalid host name: " + err.Error()
		return c
	}
	if !p.anyHost && !p.nameListed(c.host) {
		c.reason = "host is not in the allowlist"
	}
	return c
}

// Precheck tells, without a lookup or a connection, whether Dial will
// surely refuse host:port: a port the policy does not allow, an IP literal
// of a refused class or not listed, a name not listed or not a valid name.
// It is for refusing a target when it is configured (a webhook endpoint)
// rather than at every delivery; nil does not promise that Dial will
// connect (a name may resolve to a refused address).
func (p *Policy) Precheck(host string, port int) error {
	if st := p.static(host, port); st.reason != "" {
		return &RefusedError{Host: st.host, Port: port, Reason: st.reason}
	}
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
