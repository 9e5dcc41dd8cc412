package browser

import (
	"fmt"
	"strconv"
)

// DefaultMemoryBytes is the memory a session's browser may use, all its
// processes together, by default (Config.MemoryBytes): enough for ordinary
// pages, a bound on a hostile one.
const DefaultMemoryBytes = 1 << 30

// The browser's address space cannot be bounded (V8 reserves terabytes it
// never touches), so its memory is bounded two ways:
//
//   - a memory cgroup of its own (sandbox.StartRequest.MemoryBytes), where
//     the server may make one (cgroup v2's memory.max, v1's
//     memory.limit_in_bytes): past it the kernel kills one of the
//     browser's processes, a page's renderer (the action fails, at worst
//     when its timeout ends, saying the limit stopped it; the next open
//     loads a page again) or the browser itself (the action fails so, and
//     the next one starts a browser again). The server and other sessions
//     are not touched.
//   - V8's heap limit (--js-flags=--max-old-space-size, half the bound):
//     a script that fills its heap is stopped by V8, cgroup or not.
//
// Where no memory cgroup can be made (no memory controller the server may
// write to, as in some containers; sandbox.MemoryBound says), the heap
// limit is the only bound: it does not count what a page holds outside
// V8's heap (array buffers, images, the DOM), so a hostile page can still
// use the host's memory. Run the server where it can make cgroups.

// heapFlag is V8's heap limit, in MiB: half the browser's memory.
func (s *Session) heapFlag() string {
	mb := s.cfg.MemoryBytes >> 21
	if mb < 64 {
		mb = 64
	}
	return "--js-flags=--max-old-space-size=" + strconv.FormatInt(mb, 10)
}

// memoryNote says, for an error, that the browser went past its memory
// bound ("" when it did not, or cannot tell). s.mu is held, s.proc set.
func (s *Session) memoryNote() string {
	if o, ok := s.proc.(interface{ OutOfMemory() bool }); ok && o.OutOfMemory() {
		return fmt.Sprintf(": it went past its memory limit of %d MiB and the kernel stopped it", s.cfg.MemoryBytes>>20)
	}
	return ""
}
