package redact

import "slices"

// automaton is an Aho–Corasick automaton over bytes: one pass over the input
// finds every occurrence of every pattern. States are numbered in
// breadth-first order; state 0 is the root.
//
// Transitions are stored sparsely (a sorted run of edges per state) because
// the patterns can be long and many; the root, where a scan spends most of
// its time, has a full table so that a byte that starts no pattern costs one
// lookup.
type automaton struct {
	root [256]int32 // the root's transitions; 0 stays at the root
	// edgeStart[s]..edgeStart[s+1] are the edges of state s in edges,
	// sorted by byte.
	edgeStart []int32
	edges     []edge
	fail      []int32
	// out[s] is the pattern that ends at state s, or -1.
	out []int32
	// dict[s] is the nearest state on s's failure chain (excluding s) whose
	// out is set, or -1: the other patterns that end here.
	dict []int32
	// lens[p] is the length of pattern p.
	lens []int32
}

type edge struct {
	b  byte
	to int32
}

// newAutomaton builds the automaton of patterns; pattern i is reported as i.
// Patterns must be non-empty and distinct.
func newAutomaton(patterns [][]byte) *automaton {
	// Build the trie with a map per state, then lay it out breadth first.
	type node struct {
		next map[byte]int32
		out  int32
	}
	trie := []node{{out: -1}}
	for i, p := range patterns {
		s := int32(0)
		for _, b := range p {
			next, ok := trie[s].next[b]
			if !ok {
				next = int32(len(trie))
				trie = append(trie, node{out: -1})
				if trie[s].next == nil {
					trie[s].next = make(map[byte]int32)
				}
				trie[s].next[b] = next
			}
			s = next
		}
		trie[s].out = int32(i)
	}

	n := len(trie)
	a := &automaton{
		edgeStart: make([]int32, n+1),
		fail:      make([]int32, n),
		out:       make([]int32, n),
		dict:      make([]int32, n),
		lens:      make([]int32, len(patterns)),
	}
	for i, p := range patterns {
		a.lens[i] = int32(len(p))
	}
	// Renumber breadth first, so that a state's failure target (a shorter
	// string) always has a smaller number and is final before it is used.
	order := make([]int32, 0, n) // new number -> trie index
	newID := make([]int32, n)    // trie index -> new number
	order = append(order, 0)
	for i := 0; i < len(order); i++ {
		t := order[i]
		keys := make([]byte, 0, len(trie[t].next))
		for b := range trie[t].next {
			keys = append(keys, b)
		}
		slices.Sort(keys)
		for _, b := range keys {
			c := trie[t].next[b]
			newID[c] = int32(len(order))
			order = append(order, c)
		}
	}
	for id, t := range order {
		a.edgeStart[id] = int32(len(a.edges))
		keys := make([]byte, 0, len(trie[t].next))
		for b := range trie[t].next {
			keys = append(keys, b)
		}
		slices.Sort(keys)
		for _, b := range keys {
			a.edges = append(a.edges, edge{b: b, to: newID[trie[t].next[b]]})
		}
		a.out[id] = trie[t].out
	}
	a.edgeStart[n] = int32(len(a.edges))
	for _, e := range a.edges[a.edgeStart[0]:a.edgeStart[1]] {
		a.root[e.b] = e.to
	}

	// Failure links, breadth first: the failure of child c of s by byte b
	// is where b leads from s's failure.
	a.fail[0] = 0
	a.dict[0] = -1
	for s := int32(0); s < int32(n); s++ {
		for _, e := range a.edges[a.edgeStart[s]:a.edgeStart[s+1]] {
			c := e.to
			if s == 0 {
				a.fail[c] = 0
			} else {
				a.fail[c] = a.step(a.fail[s], e.b)
			}
			f := a.fail[c]
			if a.out[f] >= 0 {
				a.dict[c] = f
			} else {
				a.dict[c] = a.dict[f]
			}
		}
	}
	return a
}

// child returns the state that b leads to from s by a trie edge, or -1.
func (a *automaton) child(s int32, b byte) int32 {
	es := a.edges[a.edgeStart[s]:a.edgeStart[s+1]]
	if len(es) <= 8 {
		for _, e := range es {
			if e.b == b {
				return e.to
			}
		}
		return -1
	}
	lo, hi := 0, len(es)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if es[m].b < b {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(es) && es[lo].b == b {
		return es[lo].to
	}
	return -1
}

// step is the automaton's transition: the state after reading b in s.
func (a *automaton) step(s int32, b byte) int32 {
	for s != 0 {
		if c := a.child(s, b); c >= 0 {
			return c
		}
		s = a.fail[s]
	}
	return a.root[b]
}

// text is what the automaton scans.
type text interface{ ~string | ~[]byte }

// scan calls found(pattern, end) for every occurrence of every pattern in
// text, in order of end position (end is exclusive).
func scan[T text](a *automaton, text T, found func(pattern int32, end int)) {
	s := int32(0)
	for i := 0; i < len(text); i++ {
		b := text[i]
		if s == 0 {
			// The common case: skip bytes that start no pattern.
			s = a.root[b]
			if s == 0 {
				continue
			}
		} else {
			s = a.step(s, b)
		}
		if a.out[s] >= 0 {
			found(a.out[s], i+1)
		}
		for d := a.dict[s]; d >= 0; d = a.dict[d] {
			found(a.out[d], i+1)
		}
	}
}
