// Package egress decides which network destinations a session may reach and
// enforces it: a host Policy built from the agent's environment.network.allow
// list, and the per-session egress proxy (HTTP CONNECT and plain HTTP) that a
// sandbox reaches the network through. The http_request built-in dials
// through the same Policy, so the sandbox and the server-side tool obey one
// rule.
//
// What is refused, and why:
//   - Hosts that are not listed. An entry is an exact host name
//     ("api.example.com"), a wildcard for subdomains only ("*.example.com"
//     matches "a.example.com" and "a.b.example.com", never "example.com"), or
//     an IP literal.
//   - IP literals that are not listed, even public ones: a model that may
//     reach api.example.com must not be able to reach any address by
//     writing it down.
//   - Private (10/8, 172.16/12, 192.168/16), loopback, link-local,
//     unique-local (fc00::/7), CGNAT (100.64/10), multicast, unspecified,
//     reserved and documentation ranges, and the cloud metadata addresses
//     169.254.169.254 and fd00:ec2::254. These are where the server's own
//     API, its database and the host's credentials live. IPv4 addresses
//     embedded in IPv6 (mapped, NAT64, 6to4) are judged by the IPv4 address.
//     Such an address is allowed only when it is listed literally: listing
//     "127.0.0.1" or "10.0.0.5" is the operator's explicit opt-in, and a
//     listed name may then resolve to it.
//   - Ports other than the configured ones (80 and 443 by default).
//   - The server's own control plane (ControlPlane: the API listeners of its
//     nodes and its database), even when listed: compared by IP and port
//     after resolution, a listener on 0.0.0.0 or [::] counting for every
//     local address at its port.
//
// The rebinding rule: Dial resolves a listed name once, checks every answer,
// refuses the connection if any answer is a refused address (an attacker who
// controls a listed name's DNS could otherwise answer with 127.0.0.1 or the
// metadata address), and dials the checked IP itself, so nothing re-resolves
// the name between the check and the connection.
//
// Every decision, allowed or refused, is reported as an Event; the engine
// journals them. The proxy answers a refusal with 403 and a one-line reason,
// never forwards Proxy-Authorization or other hop-by-hop headers, and bounds
// header sizes and idle time.
//
// Event has the fields of tool.NetworkEvent and converts to it
// (tool.NetworkEvent(ev)); this package cannot name the tool type because
// internal/tool imports it.
//
// It imports only the standard library. Who may import it: internal/engine,
// internal/environment, internal/node, internal/runner (a runner runs the
// proxy beside its sandbox), internal/tool, internal/webhook and tests.
package egress
