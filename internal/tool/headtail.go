package tool

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// HeadTail is an io.Writer that keeps the first and the last bytes of what
// is written to it, up to a fixed total, and counts the rest. The shell
// tool and the sandbox both capture program output with it, so a result
// reads the same whichever ran the program. However much a
// command prints, it holds at most max bytes; the reader of the pipe keeps
// draining, so the command never blocks on a full pipe.
type HeadTail struct {
	headMax, tailMax int
	head             []byte
	ring             []byte // the tail, as a ring buffer once full
	w                int    // next write position in ring once full
	total            int64
}

// NewHeadTail keeps at most max bytes: half from the start, half from the
// end.
func NewHeadTail(max int) *HeadTail {
	h := max / 2
	return &HeadTail{headMax: h, tailMax: max - h}
}

func (b *HeadTail) Write(p []byte) (int, error) {
	n := len(p)
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

// tail returns the kept tail bytes in order.
func (b *HeadTail) tail() []byte {
	if len(b.ring) < b.tailMax || b.w == 0 {
		return b.ring
	}
	out := make([]byte, 0, len(b.ring))
	out = append(out, b.ring[b.w:]...)
	return append(out, b.ring[:b.w]...)
}

// Text returns what was kept as valid UTF-8, with a "[... N bytes truncated
// ...]" marker between head and tail when bytes were dropped, and whether
// any were. The cut points are moved to rune boundaries so a multi-byte
// character is never split into garbage; bytes that are not UTF-8 at all
// become U+FFFD, so the text is the same wherever it is decoded.
func (b *HeadTail) Text() (string, bool) {
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

// trimPartialRune drops an incomplete UTF-8 sequence at the end of p, the
// result of cutting a longer text at a byte count.
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
