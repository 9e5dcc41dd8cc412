package redact

import (
	"maps"
	"slices"
	"sort"
	"strings"
)

// MinLength is the shortest value that is redacted, in bytes (see the
// package comment).
const MinLength = 6

// anchorLen bounds the patterns in the automaton: a longer form is found by
// its first anchorLen bytes and then compared in full, which keeps the
// automaton small however long the values (the vault allows 8 KiB) and
// redacts a long value's beginning when the rest was cut off.
const anchorLen = 64

// Marker returns the text that replaces the secret name.
func Marker(name string) string { return "[REDACTED:" + name + "]" }

// Redactor replaces secret values in text. Build it with New; it is
// immutable and safe for concurrent use. A nil *Redactor redacts nothing.
type Redactor struct {
	ac *automaton
	// anchors[p] are the forms whose anchor is pattern p.
	anchors [][]form
	names   []string
	// maxLen is the length of the longest form.
	maxLen int
	// values are the secrets New was given, for Values.
	values map[string]string
}

// form is one encoding of one secret.
type form struct {
	text string
	name int32 // index in names
}

// New returns a Redactor for secrets (name -> value). Values shorter than
// MinLength are ignored. When two names share a value, the replacement names
// the first in sorted order.
func New(secrets map[string]string) *Redactor {
	names := make([]string, 0, len(secrets))
	for name := range secrets {
		names = append(names, name)
	}
	sort.Strings(names)
	r := &Redactor{names: names, values: maps.Clone(secrets)}

	index := map[string]int32{} // anchor -> pattern
	owner := map[string]bool{}  // forms already added (one name per form)
	var patterns [][]byte
	for i, name := range names {
		v := secrets[name]
		if len(v) < MinLength {
			continue
		}
		for _, f := range variants(v) {
			if owner[f] {
				continue
			}
			owner[f] = true
			anchor := f[:min(len(f), anchorLen)]
			p, ok := index[anchor]
			if !ok {
				p = int32(len(patterns))
				index[anchor] = p
				patterns = append(patterns, []byte(anchor))
				r.anchors = append(r.anchors, nil)
			}
			r.anchors[p] = append(r.anchors[p], form{text: f, name: int32(i)})
			r.maxLen = max(r.maxLen, len(f))
		}
	}
	if len(patterns) > 0 {
		r.ac = newAutomaton(patterns)
	}
	return r
}

// Values returns the secrets r redacts (name -> value), for an index held
// in memory only (the trajectory monitor hashes their fragments): never
// write one anywhere. The map is r's: do not change it.
func (r *Redactor) Values() map[string]string {
	if r == nil {
		return nil
	}
	return r.values
}

// Empty reports whether r redacts nothing.
func (r *Redactor) Empty() bool { return r == nil || r.ac == nil }

// hit is one occurrence of one secret's form.
type hit struct {
	start, end int
	name       int32
}

// region is a maximal run of overlapping hits: it is replaced as a whole.
type region struct {
	start, end int
	hits       []hit
}

// find returns the regions to replace in text, in order; nil when nothing
// matches (without allocating).
func find[T text](r *Redactor, text T) []region {
	if r.Empty() {
		return nil
	}
	var regions []region
	scan(r.ac, text, func(p int32, anchorEnd int) {
		start := anchorEnd - int(r.ac.lens[p])
		end, name := anchorEnd, int32(-1)
		// The hit extends as far as one of the anchor's forms matches: all
		// of it, or (for a long form) as much as is there.
		for _, f := range r.anchors[p] {
			n := commonPrefix(text[start:], f.text)
			if n == len(f.text) || (len(f.text) >= anchorLen && n >= anchorLen) {
				if e := start + n; e > end || name < 0 {
					end, name = e, f.name
				}
			}
		}
		if name < 0 {
			return
		}
		regions = addHit(regions, hit{start: start, end: end, name: name})
	})
	return regions
}

// addHit merges h into regions. Hits arrive in order of their anchor's end,
// and every earlier region starts before that, so h overlaps exactly the
// regions at the end of the list whose end is past h's start.
func addHit(regions []region, h hit) []region {
	merged := region{start: h.start, end: h.end}
	for len(regions) > 0 && regions[len(regions)-1].end > h.start {
		last := regions[len(regions)-1]
		regions = regions[:len(regions)-1]
		merged.start = min(merged.start, last.start)
		merged.end = max(merged.end, last.end)
		merged.hits = append(last.hits, merged.hits...)
	}
	// Coalesce with an overlapping hit of the same secret, so a long run
	// of repeats stays one hit.
	for i := len(merged.hits) - 1; i >= 0; i-- {
		g := &merged.hits[i]
		if g.name == h.name && g.end > h.start && h.end > g.start {
			g.start, g.end = min(g.start, h.start), max(g.end, h.end)
			return append(regions, merged)
		}
	}
	merged.hits = append(merged.hits, h)
	return append(regions, merged)
}

func commonPrefix[T text](text T, s string) int {
	n := min(len(text), len(s))
	for i := range n {
		if text[i] != s[i] {
			return i
		}
	}
	return n
}

// marker is the replacement of a region: the marker of each secret in it,
// in order of appearance, leaving out a secret whose every hit lies inside
// a longer hit of another (it is part of that secret's value).
func (r *Redactor) marker(rg *region) string {
	hits := rg.hits
	slices.SortFunc(hits, func(a, b hit) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	var b strings.Builder
	var done []int32
	for i, h := range hits {
		if slices.Contains(done, h.name) {
			continue
		}
		if len(hits) <= 64 && r.covered(hits, i) {
			continue
		}
		done = append(done, h.name)
		b.WriteString(Marker(r.names[h.name]))
	}
	if b.Len() == 0 {
		// Every hit is inside another's: cannot happen with at least one
		// longest hit, but never return an empty replacement.
		return Marker(r.names[hits[0].name])
	}
	return b.String()
}

// covered reports whether every hit of hits[i]'s secret lies inside a longer
// hit of another secret.
func (r *Redactor) covered(hits []hit, i int) bool {
	name := hits[i].name
	for _, h := range hits {
		if h.name != name {
			continue
		}
		inside := false
		for _, g := range hits {
			if g.name != name && g.start <= h.start && h.end <= g.end && g.end-g.start > h.end-h.start {
				inside = true
				break
			}
		}
		if !inside {
			return false
		}
	}
	return true
}

// Bytes returns b with every secret replaced. When nothing matches it
// returns b itself, so callers must not assume a copy.
func (r *Redactor) Bytes(b []byte) []byte {
	regions := find(r, b)
	if regions == nil {
		return b
	}
	out := make([]byte, 0, len(b))
	pos := 0
	for i := range regions {
		rg := &regions[i]
		out = append(out, b[pos:rg.start]...)
		out = append(out, r.marker(rg)...)
		pos = rg.end
	}
	return append(out, b[pos:]...)
}

// String returns s with every secret replaced.
func (r *Redactor) String(s string) string {
	regions := find(r, s)
	if regions == nil {
		return s
	}
	var out strings.Builder
	out.Grow(len(s))
	pos := 0
	for i := range regions {
		rg := &regions[i]
		out.WriteString(s[pos:rg.start])
		out.WriteString(r.marker(rg))
		pos = rg.end
	}
	out.WriteString(s[pos:])
	return out.String()
}

// Contains reports whether s holds any secret (in any form the redactor
// knows).
func (r *Redactor) Contains(s string) bool {
	return find(r, s) != nil
}

// safePrefix returns how many leading bytes of text can be redacted and
// written without the rest: at most limit, and never cutting through an
// occurrence of a secret.
func (r *Redactor) safePrefix(text []byte, limit int) int {
	for _, rg := range find(r, text) {
		if rg.start < limit && rg.end > limit {
			return rg.start
		}
	}
	return limit
}

// keep is how many trailing bytes a stream must hold back so that a form
// that starts in them is seen whole.
func (r *Redactor) keep() int {
	if r.Empty() {
		return 0
	}
	return r.maxLen - 1
}
