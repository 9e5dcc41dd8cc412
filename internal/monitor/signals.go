package monitor

import (
	"encoding/json"
	"math"
	"net/url"
	"regexp"
	"strings"
)

// argumentText is every string of a call's arguments, one per line: what
// the patterns read (JSON escapes are undone, so "\u002fproc" is "/proc").
func argumentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x)
			b.WriteByte('\n')
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				b.WriteString(k)
				b.WriteByte('\n')
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}

// normalize lowers text and drops the shell's quotes and escapes, so
// "/pr”oc/se\lf" reads as "/proc/self".
var unquote = strings.NewReplacer(`'`, "", `"`, "", `\`, "")

func normalize(text string) string { return strings.ToLower(unquote.Replace(text)) }

var (
	procEnviron = regexp.MustCompile(`/proc/[^/\s]+/environ`)
	// envDump is a bare env or printenv (any use of printenv reads the
	// environment; env with arguments runs a program).
	envDump = regexp.MustCompile(`(?:^|[\s;&|(` + "`" + `$])(?:printenv\b|env\s*(?:$|[;&|)>` + "`" + `]))`)
	// secretVar is the expansion of a variable that looks like a secret.
	secretVar = regexp.MustCompile(`\$\{?[A-Za-z0-9_]*(?i:vault|token|secret|api_?key|passw(?:or)?d|credential|access_key|private_key)[A-Za-z0-9_]*`)
	// secretFiles are where credentials are usually kept.
	secretFiles = []string{".vault-token", "/run/secrets", ".aws/credentials", ".netrc", ".ssh/id_", ".git-credentials", ".docker/config.json", "/var/run/secrets"}
)

// secretProbe says what probe for secrets text (and its normalized form)
// makes, "" when none, with its severity.
func secretProbe(norm, text, dataDir string) (string, string) {
	// Cheap looks first: most calls name none of these.
	proc := strings.Contains(norm, "/proc/")
	switch {
	case proc && procEnviron.MatchString(norm):
		return "reads a process's environment (/proc/*/environ)", High
	case dataDir != "" && strings.Contains(text, dataDir):
		return "names the server's data directory", High
	case proc && strings.Contains(norm, "/proc/self"):
		return "reads /proc/self", Medium
	case strings.Contains(norm, "env") && envDump.MatchString(norm):
		return "dumps the environment (env, printenv)", Medium
	case strings.Contains(text, "$") && secretVar.MatchString(unquote.Replace(text)):
		return "reads a variable named like a secret", Medium
	}
	for _, f := range secretFiles {
		if strings.Contains(norm, f) {
			return "reads a credentials file (" + f + ")", Medium
		}
	}
	return "", ""
}

var (
	// escapeCommands are programs that enter or make namespaces, mounts
	// and roots: a sandboxed agent has no use for them.
	escapeCommands = regexp.MustCompile(`(?:^|[\s;&|(` + "`" + `$/])(unshare|nsenter|chroot|pivot_root|mount|umount|capsh|setns)(?:\s|$|[;&|)])`)
	// escapePaths are the kernel's knobs and the host's sockets.
	escapePaths = []string{"/proc/sys/", "/sys/fs/cgroup", "/proc/1/root", "/proc/sysrq-trigger", "release_agent", "core_pattern", "docker.sock", "/dev/mem", "/dev/kmem"}
)

// escapeWords are the words escapeCommands needs: a command without one
// is not read by the regular expression.
var escapeWords = []string{"unshare", "nsenter", "chroot", "pivot_root", "mount", "capsh", "setns"}

func mayEscape(norm string) bool {
	for _, w := range escapeWords {
		if strings.Contains(norm, w) {
			return true
		}
	}
	return false
}

// escapeAttempt says what sandbox-escape attempt text makes, "" when none.
// The commands are read only in shell commands (prose says "mount" too).
func escapeAttempt(norm string, shell bool) string {
	if shell && mayEscape(norm) {
		if m := escapeCommands.FindStringSubmatch(norm); m != nil {
			return "runs " + m[1]
		}
	}
	for _, p := range escapePaths {
		if strings.Contains(norm, p) {
			return "touches " + strings.TrimSuffix(p, "/")
		}
	}
	return ""
}

// permissionError reports whether a call's error or output says the
// kernel refused it.
func permissionError(s string) bool {
	if s == "" {
		return false
	}
	l := strings.ToLower(s)
	return strings.Contains(l, "permission denied") || strings.Contains(l, "operation not permitted") ||
		strings.Contains(s, "EACCES") || strings.Contains(s, "EPERM")
}

// shellEgress is a shell command that sends something over the network.
var shellEgress = regexp.MustCompile(`\b(?:curl|wget|nc|ncat|socat|telnet|ssh|scp)\b|/dev/tcp/|https?://`)

// urlHost finds the first URL's host.
var urlHost = regexp.MustCompile(`https?://([^/\s:?#@]+(?:@[^/\s:?#]+)?)`)

// egressTarget reports whether a call sends something toward a host, and
// which (when it can tell).
func egressTarget(tool, norm string, args json.RawMessage) (string, bool) {
	switch tool {
	case "http_request", "browser":
		var a struct {
			URL string `json:"url"`
		}
		_ = json.Unmarshal(args, &a)
		if u, err := url.Parse(a.URL); err == nil && u.Host != "" {
			return u.Hostname(), true
		}
		return "", tool == "http_request"
	case "shell":
		if !shellEgress.MatchString(norm) {
			return "", false
		}
		if m := urlHost.FindStringSubmatch(norm); m != nil {
			h := m[1]
			if i := strings.LastIndexByte(h, '@'); i >= 0 {
				h = h[i+1:]
			}
			return h, true
		}
		return "", true
	}
	return "", false
}

// vendorSuffixes are the hosts Chromium calls on its own.
var vendorSuffixes = []string{"google.com", "googleapis.com", "gstatic.com", "gvt1.com", "gvt2.com", "googleusercontent.com", "chrome.com", "chromium.org", "googlezip.net", "doubleclick.net", "google-analytics.com"}

func vendorHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, s := range vendorSuffixes {
		if host == s || strings.HasSuffix(host, "."+s) {
			return true
		}
	}
	return false
}

// redacted is the marker the journal holds in place of a secret's value.
var redacted = regexp.MustCompile(`\[REDACTED:([A-Za-z0-9_/.-]+)\]`)

func redactedName(text string) string {
	if m := redacted.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return ""
}

// Entropy thresholds: a random token of letters of both cases and digits
// has close to log2(62) ≈ 5.95 bits per character; English words, paths,
// hex digests (at most 4 bits) and UUIDs stay under 4.3 in practice.
const (
	minEntropyLen  = 20
	minEntropyBits = 4.3
)

// token is a run of the characters tokens and keys are made of.
var token = regexp.MustCompile(`[A-Za-z0-9+=_\-]{20,}`)

// minSwitchRatio bounds the share of neighbouring characters of different
// classes (switchRatio) below which a string is read as an identifier
// (CamelCase words, a name with a number: "TestSpawn_Run40661"), which
// switches only at its words' edges, not as a random key.
const minSwitchRatio = 0.3

// highEntropy returns the length of the first string of text that looks
// like a random key (long, three classes of characters mixed all along,
// high entropy), 0 when none does.
func highEntropy(text string) int {
	for _, t := range token.FindAllString(text, 32) {
		if len(t) >= minEntropyLen && classes(t) >= 3 && switchRatio(t) >= minSwitchRatio && entropy(t) >= minEntropyBits {
			return len(t)
		}
	}
	return 0
}

// class is a character's class: 1 lower, 2 upper, 3 digit, 0 other.
func class(c byte) int {
	switch {
	case c >= 'a' && c <= 'z':
		return 1
	case c >= 'A' && c <= 'Z':
		return 2
	case c >= '0' && c <= '9':
		return 3
	}
	return 0
}

// switchRatio is the share of neighbouring pairs of s whose classes differ,
// a capital starting a word aside (about 0.45 for a random key).
func switchRatio(s string) float64 {
	if len(s) < 2 {
		return 0
	}
	n := 0
	for i := 1; i < len(s); i++ {
		// A capital then a small letter starts a word: not a switch.
		if a, b := class(s[i-1]), class(s[i]); a != 0 && b != 0 && a != b && (a != 2 || b != 1) {
			n++
		}
	}
	return float64(n) / float64(len(s)-1)
}

func classes(s string) int {
	var lower, upper, digit bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= '0' && c <= '9':
			digit = true
		}
	}
	n := 0
	for _, b := range []bool{lower, upper, digit} {
		if b {
			n++
		}
	}
	return n
}

// entropy is the Shannon entropy of s's bytes, in bits per byte.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
