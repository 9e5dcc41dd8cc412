package sandbox

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// capture is an io.Writer that keeps the first and the last bytes written
// to it, up to a fixed total, and counts the rest. However much a program
// prints, it holds at most max bytes; its reader keeps draining the pipe, so
// the program never blocks on a full pipe. The marker it puts between head
// and tail is the one the shell tool uses, so a result reads the same
// whichever backend ran it.
type capture struct {
	headMax, tailMax int
	head             []byte
	ring             []byte // the tail, as a ring buffer once full
	w                int    // next write position in ring once full
	total            int64
	budget           *outputBudget
}

func newCapture(max int, budget *outputBudget) *capture {
	h := max / 2
	return &capture{headMax: h, tailMax: max - h, budget: budget}
}

func (b *capture) Write(p []byte) (int, error) {
	n := len(p)
	b.budget.spend(n)
	b.total += int64(n)
	if room := b.headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || b.tailMax == 0 {
		return n, nil
	}
	if len(p) > b.tailMax {
		p = p[len(p)-b.tailMax:]
	}
	if room := b.tailMax - len(b.ring); room > 0 {
		k := min(room, len(p))
		b.ring = append(b.ring, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		k := copy(b.ring[b.w:], p)
		b.w = (b.w + k) % b.tailMax
		p = p[k:]
	}
	return n, nil
}

func (b *capture) tail() []byte {
	if len(b.ring) < b.tailMax || b.w == 0 {
		return b.ring
	}
	out := make([]byte, 0, len(b.ring))
	out = append(out, b.ring[b.w:]...)
	return append(out, b.ring[:b.w]...)
}

// Text returns what was kept as valid UTF-8, with a "[... N bytes truncated
// ...]" marker between head and tail when bytes were dropped, and whether
// any were. Cut points move to rune boundaries.
func (b *capture) Text() (string, bool) {
	tail := b.tail()
	dropped := b.total - int64(len(b.head)) - int64(len(tail))
	if dropped == 0 {
		s := make([]byte, 0, len(b.head)+len(tail))
		s = append(append(s, b.head...), tail...)
		return strings.ToValidUTF8(string(s), "\uFFFD"), false
	}
	head := trimPartialRune(b.head)
	skip := 0
	for skip < utf8.UTFMax-1 && skip < len(tail) && !utf8.RuneStart(tail[skip]) {
		skip++
	}
	tail = tail[skip:]
	dropped += int64(len(b.head)-len(head)) + int64(skip)
	return strings.ToValidUTF8(string(head), "\uFFFD") +
		fmt.Sprintf("\n[... %d bytes truncated ...]\n", dropped) +
		strings.ToValidUTF8(string(tail), "\uFFFD"), true
}

func trimPartialRune(p []byte) []byte {
	for k := 1; k < utf8.UTFMax && k <= len(p); k++ {
		if utf8.RuneStart(p[len(p)-k]) {
			if !utf8.FullRune(p[len(p)-k:]) {
				return p[:len(p)-k]
			}
			return p
		}
	}
	return p
}

// outputBudget counts the bytes of both streams of a run and calls exceeded
// once when they pass the limit.
type outputBudget struct {
	mu       sync.Mutex
	left     int64
	over     bool
	exceeded func()
}

func (o *outputBudget) spend(n int) {
	o.mu.Lock()
	o.left -= int64(n)
	fire := o.left < 0 && !o.over
	if fire {
		o.over = true
	}
	o.mu.Unlock()
	if fire {
		o.exceeded()
	}
}

func (o *outputBudget) exceededLimit() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.over
}
