//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkQuotaMeasureLargeWorkspace: the quota's measure of a workspace
// of 20,000 files in 400 directories after one file was written (what a
// write_file step's check costs), walked every time (the measure before
// the usage tracker) and from the tracker's record; write_only is the
// write alone, to subtract.
//
//	go test -run '^$' -bench QuotaMeasure -benchmem ./internal/sandbox/
func BenchmarkQuotaMeasureLargeWorkspace(b *testing.B) {
	ws := b.TempDir()
	for d := range 400 {
		dir := filepath.Join(ws, fmt.Sprint(d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 50 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(f)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, bc := range []struct {
		name    string
		measure measurer
	}{{"write_only", nil}, {"walked", scanWorkspace}, {"tracked", measureWorkspace}} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.measure == nil {
				bc.measure = func(string, *ids) (int64, error) { return 0, nil }
			}
			if _, err := bc.measure(ws, nil); err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				if err := os.WriteFile(filepath.Join(ws, "17", "written"), make([]byte, i%4096), 0o644); err != nil {
					b.Fatal(err)
				}
				if _, err := bc.measure(ws, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
