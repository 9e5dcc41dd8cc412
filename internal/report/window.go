package report

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Defaults and bounds of a report's parameters.
const (
	// DefaultSince is the window when since is not given.
	DefaultSince = 7 * 24 * time.Hour
	// hourlyUpTo is the longest window whose series is hourly by default.
	hourlyUpTo = 48 * time.Hour
	// maxBuckets bounds the series: over it, the window is too long for
	// the bucket asked for.
	maxBuckets = 2000
	// defaultLimit and maxLimit bound a page (API.md "Lists").
	defaultLimit = 50
	maxLimit     = 500
)

// window is a report's parameters, checked.
type window struct {
	since, until     time.Time
	agent            string
	project          string
	includeSubagents bool
	bucket           string
	step             time.Duration
	// seriesStart is since rounded down to a bucket boundary.
	seriesStart time.Time
	buckets     int
	cursor      string
	limit       int
}

// dayish matches durations in days or weeks ("7d", "2w"), which
// time.ParseDuration does not know.
var dayish = regexp.MustCompile(`^(\d{1,5})([dw])$`)

// ParseDuration reads a positive duration as since and until do: Go's
// forms (90m, 36h) or whole days and weeks (7d, 2w); the audit log's since
// takes the same.
func ParseDuration(s string) (time.Duration, bool) { return parseDuration(s) }

// parseDuration reads a positive duration: Go's forms (90m, 36h, 1h30m)
// or whole days and weeks (7d, 2w).
func parseDuration(s string) (time.Duration, bool) {
	var d time.Duration
	if m := dayish.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1]) // at most 5 digits
		unit := 24 * time.Hour
		if m[2] == "w" {
			unit *= 7
		}
		d = time.Duration(n) * unit
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, false
		}
	}
	return d, d > 0
}

// parseTime reads an RFC 3339 time, or a duration before base.
func parseTime(field, s string, base time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if d, ok := parseDuration(s); ok {
		return base.Add(-d), nil
	}
	return time.Time{}, apierror.Invalid(field, "want an RFC 3339 time (2025-03-04T05:06:07Z) or a duration before %s (7d, 36h, 90m), got %q",
		map[string]string{"since": "until", "until": "now"}[field], s)
}

// newWindow checks p against the clock's now.
func newWindow(p lt.TaskReportParams, now time.Time) (*window, error) {
	w := &window{agent: p.Agent, project: p.Project, includeSubagents: p.IncludeSubagents, cursor: p.Cursor, limit: p.Limit}
	w.until = now.UTC()
	if p.Until != "" {
		t, err := parseTime("until", p.Until, now)
		if err != nil {
			return nil, err
		}
		w.until = t
	}
	w.since = w.until.Add(-DefaultSince)
	if p.Since != "" {
		t, err := parseTime("since", p.Since, w.until)
		if err != nil {
			return nil, err
		}
		w.since = t
	}
	if !w.since.Before(w.until) {
		return nil, apierror.Invalid("since", "must be before until (%s), got %s", w.until.Format(time.RFC3339), w.since.Format(time.RFC3339))
	}
	if y := w.since.Year(); y < 1970 || w.until.Year() > 9999 {
		return nil, apierror.Invalid("since", "the window must lie between 1970 and 9999")
	}

	switch w.limit {
	case 0:
		w.limit = defaultLimit
	default:
		if w.limit < 1 || w.limit > maxLimit {
			return nil, apierror.Invalid("limit", "must be between 1 and %d, got %d", maxLimit, w.limit)
		}
	}

	w.bucket = p.Bucket
	switch w.bucket {
	case "":
		w.bucket = lt.BucketDay
		if w.until.Sub(w.since) <= hourlyUpTo {
			w.bucket = lt.BucketHour
		}
	case lt.BucketHour, lt.BucketDay:
	default:
		return nil, apierror.Invalid("bucket", "want %s or %s, got %q", lt.BucketHour, lt.BucketDay, w.bucket)
	}
	w.step = time.Hour
	if w.bucket == lt.BucketDay {
		w.step = 24 * time.Hour
	}
	// UTC hours and days: Truncate on UTC times rounds to them.
	w.seriesStart = w.since.Truncate(w.step)
	span := w.until.Sub(w.seriesStart)
	n := span / w.step
	if span%w.step != 0 {
		n++
	}
	if n > maxBuckets {
		return nil, apierror.Invalid("bucket", "a window of %s has %d %s buckets, more than %d: shorten it (since, until) or use bucket=day",
			fmtSpan(w.until.Sub(w.since)), n, w.bucket, maxBuckets)
	}
	w.buckets = int(n)
	return w, nil
}

// fmtSpan writes a window's length in days and hours.
func fmtSpan(d time.Duration) string {
	days := d / (24 * time.Hour)
	hours := (d % (24 * time.Hour)).Hours()
	if days == 0 {
		return fmt.Sprintf("%gh", hours)
	}
	return fmt.Sprintf("%dd%gh", days, hours)
}

// bucketOf returns the index of the series bucket t falls in.
func (w *window) bucketOf(t time.Time) int {
	i := int(t.Sub(w.seriesStart) / w.step)
	return min(max(i, 0), w.buckets-1)
}
