package model

import (
	"net/url"
	"strings"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// CheckBaseURL returns why raw is not a usable base URL for a provider, or
// "": an absolute http(s) URL naming a host, without credentials (keys
// never go in a spec), a query or a fragment.
func CheckBaseURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "must be a valid URL"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "must be an absolute http or https URL"
	}
	if u.Host == "" {
		return "must name a host"
	}
	if u.User != nil {
		return "must not contain credentials (name the key's environment variable in api_key_env)"
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "must not have a query or a fragment"
	}
	return ""
}

// ValidateLimits checks the fields every remote provider reads the same
// way: max_output_tokens and context_window are >= 0 (0: the defaults),
// script is refused (it belongs to the scripted provider), and pricing,
// when given, is valid. Errors are *FieldError.
func ValidateLimits(spec lt.ModelSpec) error {
	if spec.MaxOutputTokens < 0 {
		return &FieldError{Field: "max_output_tokens", Message: "must be >= 0"}
	}
	if spec.ContextWindow < 0 {
		return &FieldError{Field: "context_window", Message: "must be >= 0"}
	}
	if s := strings.TrimSpace(string(spec.Script)); s != "" && s != "null" {
		return &FieldError{Field: "script", Message: "only the scripted provider takes a script"}
	}
	if _, err := ParsePricing(spec.Pricing); err != nil {
		return err
	}
	return nil
}
