package main

import (
	"strings"
	"testing"
)

// A `longhaul bench` table (the peers print the same columns).
const benchOutput = `store: SQLite (synchronous=FULL), 1 node

  sessions  steps  agent-steps/s  p50 step  p99 step  commits/step  RSS MiB
        30    300            571   1.171ms   3.543ms          1.30     55.1
       128   1280           2114  22.331ms  43.122ms          0.05     63.0

10000 sessions waiting (on a required action, a timer or a signal): RSS 66.2 MiB, goroutines 9 before, 9 after
`

func TestParseRatesReadsTheTwoRows(t *testing.T) {
	got, err := parseRates(benchOutput)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 571 || got[1] != 2114 {
		t.Fatalf("got %v, want [571 2114]", got)
	}
}

func TestParseRatesWantsBothRuns(t *testing.T) {
	for name, out := range map[string]string{
		"no table": "peers: serial run: boom\n",
		"one row":  "  sessions  steps  agent-steps/s\n        30    300            571\n",
		"garbage":  "  sessions  steps  agent-steps/s\n        30    300            fast\n        1 1 1\n",
	} {
		if _, err := parseRates(out); err == nil {
			t.Errorf("%s: parsed, want an error", name)
		}
	}
}

func TestMedian(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("odd: got %v, want 2", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("even: got %v, want 2.5", got)
	}
}

func TestOptionsNameTheBadFlag(t *testing.T) {
	for flag, o := range map[string]options{
		"--peers":  {peers: []string{"temporal"}, rounds: 1, steps: 1, serial: 1, parallel: 1},
		"--rounds": {peers: []string{"dbos"}, steps: 1, serial: 1, parallel: 1},
		"--url":    {peers: []string{"dbos"}, rounds: 1, steps: 1, serial: 1, parallel: 1, url: "mysql://u:secret@h/db"},
	} {
		err := o.validate()
		if err == nil || !strings.Contains(err.Error(), flag) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: got %v, want an error naming the flag and no secret", flag, err)
		}
	}
}
