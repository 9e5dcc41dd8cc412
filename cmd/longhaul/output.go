package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/client"
)

// writeJSON prints v as indented JSON: the --json form of every command,
// in the API's own field names so scripts can rely on API.md.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// table is an aligned, tab-separated table for people.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

// row adds one line; cells lose tabs and line breaks so one value cannot
// shift the columns of the others.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, oneLine(c))
	}
	fmt.Fprintln(t.tw)
}

func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// oneLine collapses whitespace runs (line breaks and tabs included) to single
// spaces.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\t\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// orDash stands in for an empty cell.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fmtInt groups digits by thousands: 1234567 -> "1,234,567".
func fmtInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// fmtTokens prints a token count, "≈" before it when it includes an
// estimate (a provider that reported no usage; see lt.Usage.Estimated).
func fmtTokens(n int64, estimated bool) string {
	if estimated {
		return "≈" + fmtInt(n)
	}
	return fmtInt(n)
}

// fmtCost prints USD with enough digits for the cost of one model call.
func fmtCost(usd float64) string {
	if usd >= 100 {
		return fmt.Sprintf("$%.2f", usd)
	}
	return fmt.Sprintf("$%.4f", usd)
}

// fmtBytes prints a size in bytes, kB or MB (powers of 1000, like ls -h --si).
func fmtBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1000)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/1000/1000)
	}
}

// fmtTime prints a timestamp in the local zone, to the second.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// fmtDuration prints a duration rounded for people: 850ms, 12.3s, 4m05s.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// printError writes err for a person: the API's code, message and field
// when the server refused the request, with a hint when the server could
// not be reached at all.
func printError(w io.Writer, err error) {
	var he *hintedError
	if errors.As(err, &he) {
		defer fmt.Fprintln(w, "Hint:", he.hint)
	}
	var ae *client.APIError
	if errors.As(err, &ae) {
		// err's text ends with the API error's, which holds the code, the
		// message and the field: print what the command was doing and the
		// message once, then the code and the field on lines of their own.
		fmt.Fprintln(w, "Error:", apiErrorLine(err, ae))
		fmt.Fprintf(w, "  code:    %s (HTTP %d)\n", ae.Code, ae.Status)
		if ae.Field != "" {
			fmt.Fprintf(w, "  field:   %s\n", ae.Field)
		}
		switch {
		case ae.Status == 403 && strings.HasPrefix(ae.Message, "the policy "):
			// The key is fine: the agent's policy wants another person.
			fmt.Fprintln(w, "Hint: the policy says who may decide this action: someone it names has to.")
		case ae.Status == 401 || ae.Status == 403:
			fmt.Fprintln(w, "Hint: pass the server's API key with --api-key or LONGHAUL_API_KEY.")
		}
		return
	}
	fmt.Fprintln(w, "Error:", err)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" || errors.Is(err, syscall.ECONNREFUSED) {
		fmt.Fprintln(w, "Hint: is the server running? Start it with 'longhaul serve', or point --server (LONGHAUL_SERVER) at it.")
	}
}

// apiErrorLine is err's text with the API error ae in it reduced to its
// message: "get session ses_1: session ses_1 not found".
func apiErrorLine(err error, ae *client.APIError) string {
	msg := ae.Message
	if msg == "" {
		msg = http.StatusText(ae.Status)
	}
	if doing, ok := strings.CutSuffix(err.Error(), ae.Error()); ok && doing != "" {
		return doing + msg
	}
	return msg
}

// ms converts the journal's millisecond durations.
func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
