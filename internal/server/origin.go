package server

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A web page in the user's browser is a client of the API too, one that
// the user never chose: any page can make the browser send a "simple"
// cross-site request (a POST with a text/plain, form or multipart body, no
// preflight), and a page whose DNS name is rebound to 127.0.0.1 reads the
// answers as if it were the server's own origin. The checks below close
// both routes (API.md "Containment"); every refusal is a 403 forbidden
// naming the header at fault.
//
//   - Host (DNS rebinding): the Host header must name this server: the
//     address the connection reached (IP:port), on a loopback listener
//     also localhost or a loopback IP with that port, or a name of
//     Config.AllowedHosts. Checked whenever the server has no API keys
//     (then the peer's address is the only credential, and a rebound
//     page's requests come from loopback), and with keys as well once
//     AllowedHosts lists names (the operator said which names are ours).
//     With keys and no list, a page cannot send the key, so the check
//     would only refuse the names a server listening on every interface
//     is reached under.
//   - Origin (cross-site requests): a state-changing request (any method
//     but GET, HEAD and OPTIONS) whose Sec-Fetch-Site says cross-site or
//     same-site, or whose Origin (including "null") is not the Host's
//     origin nor one of Config.TrustedOrigins. Requests without either
//     header (curl, the CLI, the Go client) are not from a browser page
//     and pass. In every auth mode.
//   - Content-Type: a state-changing request with a body must say
//     application/json (parameters such as charset=utf-8 are fine). A page
//     can only send text/plain, form or multipart bodies without a
//     preflight, which this server never grants. In every auth mode. The
//     one exception is a file upload (filePutPattern, files.go): its body
//     is the file's bytes and must say application/octet-stream, which a
//     page cannot send cross-site without a preflight either.

// loopbackName is the name every loopback listener answers to besides its
// IP literals.
const loopbackName = "localhost"

// hostRule decides which Host headers name this server.
type hostRule struct {
	// allowed maps a lower-cased host name (no port, IPv6 without
	// brackets) to the ports it is allowed with; the port "" allows every
	// port.
	allowed map[string]map[string]bool
}

// newHostRule parses Config.AllowedHosts (already validated).
func newHostRule(names []string) hostRule {
	r := hostRule{allowed: make(map[string]map[string]bool)}
	for _, n := range names {
		host, port := splitHostPortDefault(n, "")
		ports := r.allowed[host]
		if ports == nil {
			ports = make(map[string]bool)
			r.allowed[host] = ports
		}
		ports[port] = true // "" (no port given) stands for every port
	}
	return r
}

// check returns nil when r's Host names this server.
func (h hostRule) check(r *http.Request) error {
	if r.Host == "" {
		return hostForbidden("the request has no Host header: send the server's own host and port")
	}
	defPort := "80"
	if r.TLS != nil {
		defPort = "443"
	}
	host, port := splitHostPortDefault(r.Host, defPort)
	if ports, ok := h.allowed[host]; ok && (ports[""] || ports[port]) {
		return nil
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if ownHost(host, port, local) {
		return nil
	}
	return hostForbidden(fmt.Sprintf("the Host header %s does not name this server "+
		"(a page whose DNS name points at this machine, or a proxy that needs serve --allowed-host)", quoteField(r.Host)))
}

func hostForbidden(msg string) error {
	return &apierror.Error{Status: http.StatusForbidden, Code: lt.CodeForbidden, Message: msg, Field: "Host"}
}

// ownHost reports whether host:port is the address the connection reached,
// or, on a loopback listener, localhost or a loopback IP on its port. local
// is nil when the handler runs outside an http.Server (an in-process
// caller): then the port is not known and any loopback name passes.
func ownHost(host, port string, local net.Addr) bool {
	ip, ipErr := netip.ParseAddr(host)
	isLoopbackName := host == loopbackName || (ipErr == nil && ip.Unmap().IsLoopback())
	tcp, ok := local.(*net.TCPAddr)
	if !ok {
		return isLoopbackName
	}
	if port != strconv.Itoa(tcp.Port) {
		return false
	}
	localIP, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return false
	}
	localIP = localIP.Unmap()
	if ipErr == nil && ip.Unmap() == localIP {
		return true
	}
	return localIP.IsLoopback() && isLoopbackName
}

// splitHostPortDefault splits "host[:port]" into a lower-cased host without
// brackets or a trailing dot and a port (defPort when none is given).
func splitHostPortDefault(hostport, defPort string) (host, port string) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		h, p = hostport, defPort
	}
	h = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(h, "]"), "["), ".")
	return strings.ToLower(h), p
}

// validateAllowedHost checks one Config.AllowedHosts entry: a host name or
// IP, optionally with a port; no scheme, path or wildcard.
func validateAllowedHost(s string) error {
	if s == "" || strings.ContainsAny(s, "/*@?# \t\r\n") {
		return fmt.Errorf("want a host name or IP, optionally with :PORT (no scheme, path or wildcard), got %q", s)
	}
	host, port := splitHostPortDefault(s, "")
	if host == "" {
		return fmt.Errorf("want a host name or IP, optionally with :PORT, got %q", s)
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port of %q is not a port number (1-65535)", s)
		}
	}
	return nil
}

// validateTrustedOrigin checks one Config.TrustedOrigins entry: a URL
// origin, scheme://host[:port], as a browser sends it in Origin.
func validateTrustedOrigin(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("want an origin such as https://longhaul.example.com (scheme, host and optional port only), got %q", s)
	}
	return nil
}

// newCrossOrigin returns net/http's cross-origin protection (which reads
// Sec-Fetch-Site, else compares Origin with Host) trusting origins
// (already validated).
func newCrossOrigin(origins []string) *http.CrossOriginProtection {
	c := http.NewCrossOriginProtection()
	for _, o := range origins {
		if err := c.AddTrustedOrigin(o); err != nil {
			// Validate accepted it: a wiring mistake.
			panic(fmt.Sprintf("server: trusted origin %q: %v", o, err))
		}
	}
	return c
}

// stateChanging reports whether a request of this method may change state
// (everything but the safe methods of RFC 9110 §9.2.1).
func stateChanging(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// checkCrossSite refuses a state-changing request sent by a page of
// another site, or with a body that is not JSON.
func (s *Server) checkCrossSite(r *http.Request) error {
	if !stateChanging(r.Method) {
		return nil
	}
	if err := s.crossOrigin.Check(r); err != nil {
		field, what := "Origin", "Origin "+quoteField(r.Header.Get("Origin"))
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
			field, what = "Sec-Fetch-Site", "Sec-Fetch-Site "+quoteField(site)
		}
		return &apierror.Error{Status: http.StatusForbidden, Code: lt.CodeForbidden, Field: field,
			Message: fmt.Sprintf("cross-site request refused (%s): a state-changing request must come from this server's own origin or one it trusts (serve --public-url)", what)}
	}
	if !hasBody(r) {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	want, what := "application/json", "a request body"
	if s.isFileUpload(r) {
		want, what = octetStream, "a file upload"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != want {
		got := "none"
		if ct != "" {
			got = quoteField(ct)
		}
		return &apierror.Error{Status: http.StatusForbidden, Code: lt.CodeForbidden, Field: "Content-Type",
			Message: fmt.Sprintf("%s must be sent with Content-Type: %s (got %s)", what, want, got)}
	}
	return nil
}

// hasBody reports whether r carries a body: a Content-Length above zero,
// or one of unknown length (chunked). net/http sets 0 when there is none.
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0
}

// guard applies the access rule (authorize), then the Host rule, then the
// cross-site rule: everything a request to an access-controlled route must
// pass before a handler sees it. It returns the caller authorize found,
// with the error too when only the Host or the cross-site rule refused r
// (so that the audit log names who was refused; the caller is not one
// then: it reaches no handler).
func (s *Server) guard(w http.ResponseWriter, r *http.Request) (app.Caller, error) {
	c, err := s.authorize(w, r)
	if err != nil {
		return app.Caller{}, err
	}
	if len(s.keys) == 0 || len(s.cfg.AllowedHosts) > 0 {
		if err := s.hosts.check(r); err != nil {
			return c, err
		}
	}
	if err := s.checkCrossSite(r); err != nil {
		return c, err
	}
	return c, nil
}
