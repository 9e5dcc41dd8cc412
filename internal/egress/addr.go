package egress

import (
	"net/netip"
)

// Address classes a destination may fall in; each is refused unless the
// address is listed literally.
const (
	classMetadata    = "metadata"
	classUnspecified = "unspecified"
	classLoopback    = "loopback"
	classPrivate     = "private"
	classLinkLocal   = "link-local"
	classUniqueLocal = "unique-local"
	classSiteLocal   = "site-local"
	classCGNAT       = "CGNAT"
	classMulticast   = "multicast"
	classReserved    = "reserved"
)

// metadataAddrs are the cloud instance metadata services (AWS, GCP, Azure,
// OpenStack on IPv4; AWS on IPv6). They are named apart from their ranges so
// a refusal says what was at stake.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true,
	netip.MustParseAddr("fd00:ec2::254"):   true,
}

type specialRange struct {
	prefix netip.Prefix
	class  string
}

// specialRanges are the destinations that are not the public Internet.
// The first match wins, so narrower prefixes come before the ranges that
// contain them.
var specialRanges = []specialRange{
	{netip.MustParsePrefix("0.0.0.0/8"), classUnspecified}, // "this network"
	{netip.MustParsePrefix("10.0.0.0/8"), classPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), classCGNAT},
	{netip.MustParsePrefix("127.0.0.0/8"), classLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), classLinkLocal},
	{netip.MustParsePrefix("172.16.0.0/12"), classPrivate},
	{netip.MustParsePrefix("192.0.0.0/24"), classReserved},   // IETF protocol assignments
	{netip.MustParsePrefix("192.0.2.0/24"), classReserved},   // documentation
	{netip.MustParsePrefix("192.88.99.0/24"), classReserved}, // 6to4 relay anycast
	{netip.MustParsePrefix("192.168.0.0/16"), classPrivate},
	{netip.MustParsePrefix("198.18.0.0/15"), classReserved},   // benchmarking
	{netip.MustParsePrefix("198.51.100.0/24"), classReserved}, // documentation
	{netip.MustParsePrefix("203.0.113.0/24"), classReserved},  // documentation
	{netip.MustParsePrefix("224.0.0.0/4"), classMulticast},
	{netip.MustParsePrefix("240.0.0.0/4"), classReserved}, // includes 255.255.255.255

	{netip.MustParsePrefix("::/128"), classUnspecified},
	{netip.MustParsePrefix("::1/128"), classLoopback},
	{netip.MustParsePrefix("::/96"), classReserved},           // IPv4-compatible (deprecated)
	{netip.MustParsePrefix("::ffff:0:0:0/96"), classReserved}, // IPv4-translated
	{netip.MustParsePrefix("64:ff9b:1::/48"), classReserved},  // local-use NAT64
	{netip.MustParsePrefix("100::/64"), classReserved},        // discard
	{netip.MustParsePrefix("2001::/23"), classReserved},       // IETF protocol assignments, Teredo
	{netip.MustParsePrefix("2001:db8::/32"), classReserved},   // documentation
	{netip.MustParsePrefix("fc00::/7"), classUniqueLocal},     // includes fd00:ec2::254
	{netip.MustParsePrefix("fe80::/10"), classLinkLocal},
	{netip.MustParsePrefix("fec0::/10"), classSiteLocal}, // deprecated, still routed by some
	{netip.MustParsePrefix("ff00::/8"), classMulticast},
	{netip.MustParsePrefix("3fff::/20"), classReserved}, // documentation
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// addressClass returns the class of a that makes it a refused destination,
// or "" for a public address. a must be unmapped and without a zone.
func addressClass(a netip.Addr) string {
	if metadataAddrs[a] {
		return classMetadata
	}
	for _, r := range specialRanges {
		if r.prefix.Contains(a) {
			return r.class
		}
	}
	// IPv6 forms that carry an IPv4 address reach that address through a
	// translator or a tunnel: they are what the IPv4 address is.
	if a.Is6() {
		b := a.As16()
		var v4 netip.Addr
		switch {
		case nat64Prefix.Contains(a):
			v4 = netip.AddrFrom4([4]byte(b[12:16]))
		case sixToFour.Contains(a):
			v4 = netip.AddrFrom4([4]byte(b[2:6]))
		}
		if v4.IsValid() {
			if c := addressClass(v4); c != "" {
				return c + " (embedded " + v4.String() + ")"
			}
		}
	}
	return ""
}

// canonicalAddr is the form addresses are compared in: IPv4-mapped IPv6
// addresses as IPv4, no zone.
func canonicalAddr(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}
