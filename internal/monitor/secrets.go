package monitor

import (
	"hash/maphash"
	"sort"
)

// SecretIndex holds the fragments of the vault's values as hashes, in
// memory only: the monitor finds a secret sent out in pieces (each piece
// too short for the redactor, the whole reassembled by whoever receives
// them) without keeping a byte of it anywhere.
type SecretIndex struct {
	seed maphash.Seed
	// k is the fragment length of each secret; n its length.
	secrets []indexed
	// grams maps a fragment's hash to the secrets and positions it is at.
	grams map[uint64][]gramRef
	// sizes are the distinct fragment lengths, for the scan.
	sizes []int
}

type indexed struct {
	name string
	n, k int
}

type gramRef struct {
	secret int32
	pos    int32
}

// minFragment is the shortest fragment looked for: shorter ones occur by
// chance in ordinary text.
const minFragment = 6

// fragmentLen is the fragment length for a value of n bytes: 8, or a third
// of a shorter value (at least minFragment).
func fragmentLen(n int) int { return max(minFragment, min(8, n/3)) }

// NewSecretIndex indexes values (name -> value). Values too short to be
// split in two fragments are left out: the redactor covers them whole.
func NewSecretIndex(values map[string]string) *SecretIndex {
	x := &SecretIndex{seed: maphash.MakeSeed(), grams: map[uint64][]gramRef{}}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	sizes := map[int]bool{}
	for _, name := range names {
		v := values[name]
		k := fragmentLen(len(v))
		if len(v) < 2*k {
			continue
		}
		i := int32(len(x.secrets))
		x.secrets = append(x.secrets, indexed{name: name, n: len(v), k: k})
		sizes[k] = true
		for p := 0; p+k <= len(v); p++ {
			h := maphash.String(x.seed, v[p:p+k])
			x.grams[h] = append(x.grams[h], gramRef{secret: i, pos: int32(p)})
		}
	}
	for k := range sizes {
		x.sizes = append(x.sizes, k)
	}
	sort.Ints(x.sizes)
	return x
}

// Len is how many secrets are indexed.
func (x *SecretIndex) Len() int {
	if x == nil {
		return 0
	}
	return len(x.secrets)
}

// coverage is which bytes of one secret calls toward hosts carried.
type coverage struct {
	N    int    `json:"n"`
	Bits []byte `json:"bits"`
	// Calls are the calls' events, at most maxHits: past it the first
	// maxHits-1 and the newest (the one that completes a finding is
	// always its newest evidence). Count is how many there were.
	Calls []int64 `json:"calls"`
	Count int     `json:"count,omitempty"`
}

// addCall records the call of event seq (once).
func (c *coverage) addCall(seq int64) {
	if n := len(c.Calls); n > 0 && c.Calls[n-1] == seq {
		return
	}
	c.Count = max(c.Count, len(c.Calls)) + 1
	if len(c.Calls) < maxHits {
		c.Calls = append(c.Calls, seq)
		return
	}
	c.Calls[len(c.Calls)-1] = seq
}

// calls is how many calls carried fragments (a state saved before Count
// was kept has only Calls).
func (c *coverage) calls() int { return max(c.Count, len(c.Calls)) }

func newCoverage(n int) *coverage { return &coverage{N: n, Bits: make([]byte, (n+7)/8)} }

func (c *coverage) set(from, to int) {
	for i := from; i < to; i++ {
		c.Bits[i/8] |= 1 << (i % 8)
	}
}

func (c *coverage) count() int {
	n := 0
	for i := range len(c.Bits) * 8 {
		if c.Bits[i/8]&(1<<(i%8)) != 0 {
			n++
		}
	}
	return n
}

func (c *coverage) percent() int { return c.count() * 100 / max(1, c.N) }

// match marks the fragments of secrets text holds, as event seq, in st's
// coverage, and returns the secrets now at least half carried out, and
// what text alone carries of each secret it touches.
func (x *SecretIndex) match(text string, st *state, seq int64) ([]string, map[string]*coverage) {
	if x.Len() == 0 {
		return nil, nil
	}
	touched := map[int32]bool{}
	var carried map[string]*coverage
	for _, k := range x.sizes {
		for p := 0; p+k <= len(text); p++ {
			refs := x.grams[maphash.String(x.seed, text[p:p+k])]
			for _, r := range refs {
				s := x.secrets[r.secret]
				if s.k != k {
					continue
				}
				if st.Coverage == nil {
					st.Coverage = map[string]*coverage{}
				}
				c := st.Coverage[s.name]
				if c == nil {
					c = newCoverage(s.n)
					st.Coverage[s.name] = c
				}
				c.set(int(r.pos), int(r.pos)+k)
				if carried == nil {
					carried = map[string]*coverage{}
				}
				if carried[s.name] == nil {
					carried[s.name] = newCoverage(s.n)
				}
				carried[s.name].set(int(r.pos), int(r.pos)+k)
				if !touched[r.secret] {
					touched[r.secret] = true
					c.addCall(seq)
				}
			}
		}
	}
	var out []string
	for i := range x.secrets {
		s := x.secrets[i]
		if !touched[int32(i)] {
			continue
		}
		if c := st.Coverage[s.name]; c.count()*2 >= s.n {
			out = append(out, s.name)
		}
	}
	return out, carried
}
