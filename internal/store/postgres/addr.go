package postgres

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Addresses returns the TCP addresses ("host:port") the store at url
// connects to: its host and any fallback hosts, with the PG* environment
// variables applied as the driver applies them. Unix sockets are left out
// (no network path reaches them). The server refuses these addresses to
// the sessions' network (a session must never reach its own database).
func Addresses(url string) ([]string, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		// The driver's error may quote the URL, password included.
		return nil, fmt.Errorf("read the database's address from the store URL: it does not parse")
	}
	var out []string
	add := func(host string, port uint16) {
		if host == "" || strings.HasPrefix(host, "/") {
			return
		}
		a := net.JoinHostPort(host, strconv.Itoa(int(port)))
		for _, o := range out {
			if o == a {
				return
			}
		}
		out = append(out, a)
	}
	add(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	return out, nil
}
