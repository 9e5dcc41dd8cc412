package main

import (
	"net/url"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/otelexport"
)

// otlpSettings says whether and where a node exports turn traces over OTLP
// (internal/node starts the exporter).
type otlpSettings struct {
	// endpoint is --otlp-endpoint ("": the OTEL_EXPORTER_OTLP_* variables,
	// which the exporter reads itself).
	endpoint string
	protocol string
}

// otlpFromEnv decides whether serve exports traces: when --otlp-endpoint
// is given, or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT is set, unless OTEL_SDK_DISABLED is true or
// OTEL_TRACES_EXPORTER names no otlp exporter (e.g. none). It returns nil
// when export is off.
func (c *cli) otlpFromEnv(flag string) (*otlpSettings, error) {
	if flag != "" {
		u, err := url.Parse(flag)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, usagef("--otlp-endpoint %q: want the collector's http:// or https:// URL, e.g. http://localhost:4318", flag)
		}
	}
	if strings.EqualFold(strings.TrimSpace(c.getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	if exp := strings.TrimSpace(c.getenv("OTEL_TRACES_EXPORTER")); exp != "" && !strings.Contains(exp, "otlp") {
		return nil, nil
	}
	if flag == "" && c.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && c.getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return nil, nil
	}
	name, protocol := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", c.getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		name, protocol = "OTEL_EXPORTER_OTLP_PROTOCOL", c.getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "", otelexport.ProtocolHTTPProtobuf, otelexport.ProtocolHTTPJSON, otelexport.ProtocolGRPC:
	default:
		return nil, usagef("%s=%q: want %s, %s or %s", name, protocol, otelexport.ProtocolHTTPProtobuf, otelexport.ProtocolHTTPJSON, otelexport.ProtocolGRPC)
	}
	return &otlpSettings{endpoint: flag, protocol: protocol}, nil
}
