package engine

import (
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/journal"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Stop-condition defaults, used where an agent leaves them zero.
const (
	defaultMaxToolErrorStreak = 10
	defaultMaxRepeatedCalls   = 5
)

// turnTimeLeft is how long the current turn may still run, if it has a
// timeout.
func (r *runner) turnTimeLeft() (time.Duration, bool) {
	end, ok := r.turnDeadline()
	if !ok {
		return 0, false
	}
	return end.Sub(r.e.clock.Now()), true
}

// checkStop applies the stop conditions that hold between steps: the turn
// timeout and the streak of failed tool calls. It reports whether the loop
// may go on.
func (r *runner) checkStop() (bool, error) {
	if left, ok := r.turnTimeLeft(); ok && left <= 0 {
		return false, r.failTurn(lt.StopTimeout, fmt.Sprintf("the turn ran past its timeout of %d s", r.spec.TurnTimeoutSeconds))
	}
	limit := r.spec.MaxConsecutiveToolErrors
	if limit <= 0 {
		limit = defaultMaxToolErrorStreak
	}
	if r.st.ToolErrorStreak >= limit {
		return false, r.failTurn(lt.StopToolErrors, fmt.Sprintf("%d tool calls failed in a row", r.st.ToolErrorStreak))
	}
	return true, nil
}

// checkLoop refuses a call the model asked for with the same arguments too
// many times in a row, and ends the turn: a model repeating itself is not
// making progress, and an effect must not be repeated by a loop.
func (r *runner) checkLoop(c *journal.Call) (bool, error) {
	limit := r.spec.MaxRepeatedCalls
	if limit <= 0 {
		limit = defaultMaxRepeatedCalls
	}
	if c.Repeat < limit {
		return true, nil
	}
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	if err := r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{
		Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Refused: lt.RefusedLoop,
		Error: fmt.Sprintf("refused: %s was called with the same arguments %d times in a row", c.Tool, c.Repeat),
	}); err != nil {
		return false, err
	}
	return false, r.failTurn(lt.StopLoopDetected, fmt.Sprintf("loop detected: %s called with the same arguments %d times in a row", c.Tool, c.Repeat))
}
