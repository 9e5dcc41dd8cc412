package egress

import "net/netip"

// NewControlPlaneForTest returns a control plane whose host has the
// interface addresses local returns, instead of this machine's.
func NewControlPlaneForTest(local func() []string) *ControlPlane {
	return &ControlPlane{localAddrs: func() ([]netip.Addr, error) {
		var out []netip.Addr
		for _, s := range local() {
			out = append(out, netip.MustParseAddr(s))
		}
		return out, nil
	}}
}
