package vault

import (
	"encoding/base64"
	"fmt"
	"net/textproto"
	"regexp"
	"slices"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Injection says how a secret goes into a request (see
// longhaultype.SecretInjection for its forms).
type Injection = lt.SecretInjection

// Limits.
const (
	MinValueLen = 8
	MaxValueLen = 8 << 10
	MaxHosts    = 32
)

var namePattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// ValidName reports whether name may name a secret: ^[A-Z][A-Z0-9_]{0,63}$.
func ValidName(name string) bool { return namePattern.MatchString(name) }

func checkName(name string) error {
	if !ValidName(name) {
		return apierror.Invalid("name", "secret name %s must be an upper-case letter then up to 63 upper-case letters, digits or underscores (like GITHUB_TOKEN)", quote(name))
	}
	return nil
}

// checkValue validates a value without ever echoing it.
func checkValue(value string) error {
	switch {
	case value == "":
		return apierror.Invalid("value", "value is required")
	case len(value) < MinValueLen:
		return apierror.Invalid("value", "value must be at least %d bytes: shorter ones could not be told from ordinary text when they are redacted", MinValueLen)
	case len(value) > MaxValueLen:
		return apierror.Invalid("value", "value must be at most %d bytes", MaxValueLen)
	}
	if strings.IndexFunc(value, isControl) >= 0 {
		return apierror.Invalid("value", "value contains a control character (such as a line break): it goes into an HTTP header, which cannot carry one")
	}
	return nil
}

// isControl reports the characters an HTTP header value cannot hold (a tab
// is allowed).
func isControl(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }

// Header names a secret may not be injected into: they frame the request
// or the connection, and overriding them would break or smuggle requests.
var forbiddenHeaders = []string{
	"Connection", "Content-Length", "Expect", "Host", "Keep-Alive", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

var tokenPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")

// placeholder is what a format's value goes in place of.
const placeholder = "{value}"

// normalizeInjection validates inj and returns its canonical form: the
// header always named (canonical case), a format only for the header form.
func normalizeInjection(inj *Injection) (Injection, error) {
	if inj == nil {
		return Injection{}, apierror.Invalid("inject", `inject is required: {"bearer": true}, {"basic": {"username": "…"}}, {"header": "…", "format": "… {value}"} or {"login": {"username": "…"}}`)
	}
	if inj.Login != nil {
		return normalizeLogin(inj)
	}
	out := Injection{Bearer: inj.Bearer}
	if inj.Bearer && inj.Basic != nil {
		return out, apierror.Invalid("inject", "give one of bearer, basic or header")
	}
	header := inj.Header
	if header == "" {
		if !inj.Bearer && inj.Basic == nil {
			return out, apierror.Invalid("inject.header", `inject.header is required (or give "bearer": true or "basic")`)
		}
		header = "Authorization"
	}
	if !tokenPattern.MatchString(header) {
		return out, apierror.Invalid("inject.header", "header name %s is not a valid HTTP header name", quote(header))
	}
	header = textproto.CanonicalMIMEHeaderKey(header)
	if slices.Contains(forbiddenHeaders, header) {
		return out, apierror.Invalid("inject.header", "a secret cannot be injected into the %s header", header)
	}
	out.Header = header
	switch {
	case inj.Bearer || inj.Basic != nil:
		if inj.Format != "" {
			return out, apierror.Invalid("inject.format", "format is not allowed with bearer or basic (they have their own)")
		}
		if inj.Basic != nil {
			u := inj.Basic.Username
			switch {
			case strings.Contains(u, ":"):
				return out, apierror.Invalid("inject.basic.username", "a basic authentication user name cannot contain ':'")
			case strings.IndexFunc(u, isControl) >= 0:
				return out, apierror.Invalid("inject.basic.username", "the user name contains a control character")
			case len(u) > 256:
				return out, apierror.Invalid("inject.basic.username", "the user name has more than 256 bytes")
			}
			out.Basic = &lt.SecretBasicAuth{Username: u}
		}
	default:
		format := inj.Format
		if format == "" {
			format = placeholder
		}
		switch {
		case !strings.Contains(format, placeholder):
			return out, apierror.Invalid("inject.format", "format must contain %s, where the value goes", placeholder)
		case strings.IndexFunc(format, isControl) >= 0:
			return out, apierror.Invalid("inject.format", "format contains a control character")
		case len(format) > 256:
			return out, apierror.Invalid("inject.format", "format has more than 256 bytes")
		}
		out.Format = format
	}
	return out, nil
}

// normalizeLogin validates a login (the browser's login action): a user
// name, and nothing that would put the value into a request.
func normalizeLogin(inj *Injection) (Injection, error) {
	switch {
	case inj.Bearer || inj.Basic != nil || inj.Header != "" || inj.Format != "":
		return Injection{}, apierror.Invalid("inject.login", "login goes alone: a login's password is typed into a web site's form by the browser, never put into a header")
	case strings.TrimSpace(inj.Login.Username) == "":
		return Injection{}, apierror.Invalid("inject.login.username", "the user name is required")
	case strings.IndexFunc(inj.Login.Username, isControl) >= 0:
		return Injection{}, apierror.Invalid("inject.login.username", "the user name contains a control character")
	case len(inj.Login.Username) > 256:
		return Injection{}, apierror.Invalid("inject.login.username", "the user name has more than 256 bytes")
	}
	return Injection{Login: &lt.SecretLogin{Username: inj.Login.Username}}, nil
}

// headerValue is the header value that injects value by inj (normalised).
func headerValue(inj Injection, value string) string {
	switch {
	case inj.Bearer:
		return "Bearer " + value
	case inj.Basic != nil:
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(inj.Basic.Username+":"+value))
	default:
		return strings.ReplaceAll(inj.Format, placeholder, value)
	}
}

// quote shortens and quotes a user-supplied name or host for a message.
// It is never given a secret's value.
func quote(s string) string {
	const maxLen = 80
	if len(s) > maxLen {
		s = s[:maxLen] + "…"
	}
	return fmt.Sprintf("%q", strings.ToValidUTF8(s, "\uFFFD"))
}
