package sandbox

import (
	"sync"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// capture keeps the head and tail of one stream (tool.HeadTail: the same
// marker and rune-safe cuts as the shell tool) and charges every byte to
// the run's output budget.
type capture struct {
	*tool.HeadTail
	budget *outputBudget
}

func newCapture(max int, budget *outputBudget) *capture {
	return &capture{HeadTail: tool.NewHeadTail(max), budget: budget}
}

func (b *capture) Write(p []byte) (int, error) {
	b.budget.spend(len(p))
	return b.HeadTail.Write(p)
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
