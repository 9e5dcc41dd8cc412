package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ControlPlane is the set of addresses of the server's own control plane:
// the API listeners of its nodes and its database. Policy.Dial refuses them
// whatever an agent lists, so a session can never call the API that decides
// its own approvals, nor reach the database that holds its journal.
//
// Addresses are compared as IP and port, never as text: a listener on
// 127.0.0.1:8080 is also "localhost:8080", "[::ffff:127.0.0.1]:8080" and
// "0.0.0.0:8080" (connecting to the unspecified address reaches the local
// host). A listener on the unspecified address (0.0.0.0:PORT, [::]:PORT)
// is reachable on every address of the host at that port, so every local
// address (loopback, unspecified, and the addresses of the host's network
// interfaces) is refused at that port. Entries that name a host (a database
// URL's "db.internal") are resolved when a connection is checked.
//
// The addresses are kept in groups (Set replaces one), so the list of
// other nodes can be refreshed while sessions run. The zero value is empty
// and ready to use; it is safe for concurrent use.
type ControlPlane struct {
	mu     sync.RWMutex
	groups map[string][]controlAddr
	// localAddrs returns the addresses of the host's interfaces (default:
	// net.InterfaceAddrs).
	localAddrs func() ([]netip.Addr, error)

	// refresh, when set, is called before a check when the last call is
	// older than refreshEvery (see SetRefresher).
	refreshMu    sync.Mutex
	refresh      func(ctx context.Context) error
	refreshEvery time.Duration
	refreshedAt  time.Time
	now          func() time.Time
}

// SetRefresher makes every check first call refresh (which calls Set for
// the groups it keeps current, such as the other nodes' addresses read from
// the database) when its last call is older than every. A failed refresh
// keeps the addresses known so far; the next check tries again.
func (c *ControlPlane) SetRefresher(every time.Duration, now func() time.Time, refresh func(ctx context.Context) error) {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	c.refresh, c.refreshEvery, c.now, c.refreshedAt = refresh, every, now, time.Time{}
}

// maybeRefresh runs the refresher when it is due; one caller at a time.
func (c *ControlPlane) maybeRefresh(ctx context.Context) {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	if c.refresh == nil {
		return
	}
	now := c.now()
	if !c.refreshedAt.IsZero() && now.Sub(c.refreshedAt) < c.refreshEvery {
		return
	}
	if err := c.refresh(ctx); err == nil {
		c.refreshedAt = now
	}
}

// controlAddr is one control plane address: an IP literal (addr valid) or
// a host name resolved when checked.
type controlAddr struct {
	addr netip.Addr
	name string
	port int
	// what says whose it is, for the refusal: "the server's API".
	what string
}

// Control plane groups (Set's group argument) used by the server's wiring.
const (
	GroupListen   = "listen"   // this node's API listeners
	GroupNodes    = "nodes"    // the other nodes' API addresses
	GroupDatabase = "database" // the database the store is on
	GroupExtra    = "extra"    // addresses the operator lists
)

// Set replaces the addresses of group with hostports ("127.0.0.1:8080",
// "[::]:8080", "db.internal:5432"), each described by what in refusals ("the
// server's API"). An invalid entry is an error naming it, and nothing is
// changed.
func (c *ControlPlane) Set(group, what string, hostports []string) error {
	addrs := make([]controlAddr, 0, len(hostports))
	for i, hp := range hostports {
		a, err := parseControlAddr(hp)
		if err != nil {
			return fmt.Errorf("control plane %s[%d] %q: %w", group, i, hp, err)
		}
		a.what = what
		addrs = append(addrs, a)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		c.groups = make(map[string][]controlAddr)
	}
	c.groups[group] = addrs
	return nil
}

// Add adds one address to group (see Set).
func (c *ControlPlane) Add(group, what, hostport string) error {
	a, err := parseControlAddr(hostport)
	if err != nil {
		return fmt.Errorf("control plane %s %q: %w", group, hostport, err)
	}
	a.what = what
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		c.groups = make(map[string][]controlAddr)
	}
	c.groups[group] = append(c.groups[group], a)
	return nil
}

// Addresses returns every address, by group then in the order given, as
// "host:port" (for logs and tests).
func (c *ControlPlane) Addresses() []string {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	groups := make([]string, 0, len(c.groups))
	for g := range c.groups {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	var out []string
	for _, g := range groups {
		for _, a := range c.groups[g] {
			out = append(out, a.String())
		}
	}
	return out
}

func (a controlAddr) String() string {
	host := a.name
	if a.addr.IsValid() {
		host = a.addr.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(a.port))
}

func parseControlAddr(hostport string) (controlAddr, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return controlAddr{}, fmt.Errorf("want HOST:PORT: %w", err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return controlAddr{}, fmt.Errorf("port %q is not a port number (1-65535)", p)
	}
	if host == "" {
		// ":8080" listens on every address.
		return controlAddr{addr: netip.IPv6Unspecified(), port: port}, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return controlAddr{addr: canonicalAddr(a), port: port}, nil
	}
	name := normalizeName(host)
	if err := checkName(name); err != nil && name != "localhost" {
		return controlAddr{}, err
	}
	return controlAddr{name: name, port: port}, nil
}

// atPort returns the addresses at port.
func (c *ControlPlane) atPort(port int) []controlAddr {
	c.mu.RLock()
	defer c.mu.RUnlock()
	// In a fixed order, so that an address in two groups is always named
	// by the same one (this node's listener first).
	names := make([]string, 0, len(c.groups))
	for g := range c.groups {
		names = append(names, g)
	}
	slices.SortFunc(names, func(x, y string) int {
		if x == GroupListen || y == GroupListen {
			return strings.Compare(strconv.FormatBool(x != GroupListen), strconv.FormatBool(y != GroupListen))
		}
		return strings.Compare(x, y)
	})
	var out []controlAddr
	for _, name := range names {
		for _, a := range c.groups[name] {
			if a.port == port {
				out = append(out, a)
			}
		}
	}
	return out
}

// check returns why connecting to a:port would reach the control plane, or
// "" when it would not. Names among the entries are resolved with r; one
// that does not resolve cannot be compared and is skipped (the destination
// is still judged by the rest of the policy, which refuses private and
// loopback addresses unless listed).
func (c *ControlPlane) check(ctx context.Context, r Resolver, a netip.Addr, port int) string {
	if c == nil {
		return ""
	}
	c.maybeRefresh(ctx)
	return c.checkAddr(ctx, r, a, port)
}

// checkAddr is check without the refresh.
func (c *ControlPlane) checkAddr(ctx context.Context, r Resolver, a netip.Addr, port int) string {
	entries := c.atPort(port)
	if len(entries) == 0 {
		return ""
	}
	a = canonicalAddr(a)
	var local []netip.Addr // read once, when first needed
	localLoaded := false
	isLocal := func(x netip.Addr) bool {
		if x.IsLoopback() || x.IsUnspecified() {
			return true
		}
		if !localLoaded {
			localLoaded = true
			local = c.interfaceAddrs()
		}
		return slices.Contains(local, x)
	}
	for _, e := range entries {
		targets := []netip.Addr{e.addr}
		if !e.addr.IsValid() {
			targets = resolveAll(ctx, r, e.name)
		}
		for _, t := range targets {
			if controlMatch(t, a, isLocal) {
				what := e.what
				if what == "" {
					what = "the server's control plane"
				}
				return fmt.Sprintf("%s is %s: an agent may not reach its own control plane", net.JoinHostPort(a.String(), strconv.Itoa(port)), what)
			}
		}
	}
	return ""
}

// controlMatch reports whether a connection to a reaches a listener on l
// (the ports being equal).
func controlMatch(l, a netip.Addr, isLocal func(netip.Addr) bool) bool {
	switch {
	case l == a:
		return true
	case l.IsUnspecified():
		// Listening on every address: every local address reaches it.
		return isLocal(a)
	case a.IsUnspecified():
		// Connecting to 0.0.0.0 or [::] reaches the local host.
		return isLocal(l)
	case l.IsLoopback() && a.IsLoopback():
		// 127.0.0.2 is not 127.0.0.1, but some systems route the whole
		// block to one listener; refusing the block costs nothing.
		return true
	}
	return false
}

func resolveAll(ctx context.Context, r Resolver, name string) []netip.Addr {
	if name == "localhost" {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
	}
	if r == nil {
		r = net.DefaultResolver
	}
	answers, err := r.LookupIPAddr(ctx, name)
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(answers))
	for _, ans := range answers {
		if a, ok := netip.AddrFromSlice(ans.IP); ok {
			out = append(out, canonicalAddr(a))
		}
	}
	return out
}

func (c *ControlPlane) interfaceAddrs() []netip.Addr {
	if c.localAddrs != nil {
		addrs, _ := c.localAddrs()
		return addrs
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(ifaddrs))
	for _, ia := range ifaddrs {
		s := ia.String()
		if i := strings.IndexByte(s, '/'); i >= 0 {
			s = s[:i]
		}
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, canonicalAddr(a))
		}
	}
	return out
}

// Check returns why connecting to host:port would reach the control plane,
// or "" when it would not: for a check made outside a Policy (a model's
// base_url). A host name is resolved with the default resolver; one that
// does not resolve is reported as not the control plane (the connection
// will fail anyway).
func (c *ControlPlane) Check(ctx context.Context, host string, port int) string {
	if c == nil {
		return ""
	}
	c.maybeRefresh(ctx)
	if len(c.atPort(port)) == 0 {
		return "" // nothing to resolve a name for
	}
	lit := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(lit); err == nil {
		return c.checkAddr(ctx, nil, a.WithZone(""), port)
	}
	for _, a := range resolveAll(ctx, nil, normalizeName(host)) {
		if reason := c.checkAddr(ctx, nil, a, port); reason != "" {
			return reason
		}
	}
	return ""
}
