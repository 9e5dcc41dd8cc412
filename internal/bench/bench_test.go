package bench

import (
	"context"
	"testing"
)

// BenchmarkSerial runs one session of 10 agent steps at a time.
func BenchmarkSerial(b *testing.B) {
	benchSessions(b, 1)
}

// BenchmarkConcurrent64 runs 64 sessions of 10 agent steps concurrently.
func BenchmarkConcurrent64(b *testing.B) {
	benchSessions(b, 64)
}

func benchSessions(b *testing.B, sessions int) {
	var steps int
	var commits float64
	for b.Loop() {
		res, err := Run(context.Background(), Config{Dir: b.TempDir(), Sessions: sessions, Steps: 10})
		if err != nil {
			b.Fatal(err)
		}
		steps += res.Steps
		commits += res.CommitsPerStep * float64(res.Steps)
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "agent-steps/s")
	b.ReportMetric(commits/float64(steps), "commits/step")
}

// TestRunSmoke checks that a small run completes and measures what it says.
func TestRunSmoke(t *testing.T) {
	res, err := Run(context.Background(), Config{Dir: t.TempDir(), Sessions: 4, Steps: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 12 || res.Sessions != 4 {
		t.Fatalf("ran %d sessions, %d steps; want 4, 12", res.Sessions, res.Steps)
	}
	if res.CommitsPerStep <= 0 || res.CommitsPerStep > 3 {
		t.Fatalf("commits per step = %.2f, want in (0, 3]", res.CommitsPerStep)
	}
	w, err := Waiting(context.Background(), t.TempDir(), 50)
	if err != nil {
		t.Fatal(err)
	}
	if w.Sessions != 50 {
		t.Fatalf("waiting sessions = %d, want 50", w.Sessions)
	}
	if w.GoroutinesAfter > w.GoroutinesBefore+10 {
		t.Fatalf("goroutines grew from %d to %d with 50 waiting sessions: waiting must hold none", w.GoroutinesBefore, w.GoroutinesAfter)
	}
}
