package engine

import (
	"fmt"
	"strings"
)

// diffContext is how many unchanged lines surround each change.
const diffContext = 3

// maxDiffCells bounds the comparison's table (lines before × lines after,
// once the common head and tail are set aside): beyond it the changed
// middle is shown as removed then added, which is still true, only longer.
const maxDiffCells = 1 << 20

// lineDiff is a unified diff of before and after, line by line, with name
// as both files' name: what a person reviewing a change expects to read.
func lineDiff(name, before, after string) string {
	a, b := splitLines(before), splitLines(after)
	ops := diffLines(a, b)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", name, name)
	// Group the operations into hunks: runs of changes with up to
	// diffContext equal lines around them.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-diffContext, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			// An equal run: does another change follow within reach?
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run < len(ops) && run-end <= 2*diffContext {
				end = run
				continue
			}
			end = min(end+diffContext, len(ops))
			break
		}
		aStart, bStart, aLen, bLen := ops[start].a, ops[start].b, 0, 0
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, op := range ops[start:end] {
			out.WriteByte(op.kind)
			out.WriteString(op.line)
			out.WriteByte('\n')
		}
		i = end
	}
	return strings.TrimSuffix(out.String(), "\n")
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// diffOp is one line of a diff: kept (' '), removed ('-') or added ('+'),
// with its index in before (a) and after (b).
type diffOp struct {
	kind byte
	line string
	a, b int
}

// diffLines is a shortest edit script by the longest common subsequence,
// after setting aside the common head and tail.
func diffLines(a, b []string) []diffOp {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	var ops []diffOp
	for i := range head {
		ops = append(ops, diffOp{' ', a[i], i, i})
	}
	ma, mb := a[head:len(a)-tail], b[head:len(b)-tail]
	if len(ma)*len(mb) > maxDiffCells {
		for i, l := range ma {
			ops = append(ops, diffOp{'-', l, head + i, head})
		}
		for j, l := range mb {
			ops = append(ops, diffOp{'+', l, head + len(ma), head + j})
		}
	} else {
		// lcs[i][j]: the longest common subsequence of ma[i:] and mb[j:].
		lcs := make([][]int32, len(ma)+1)
		for i := range lcs {
			lcs[i] = make([]int32, len(mb)+1)
		}
		for i := len(ma) - 1; i >= 0; i-- {
			for j := len(mb) - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(ma) || j < len(mb) {
			switch {
			case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
				ops = append(ops, diffOp{' ', ma[i], head + i, head + j})
				i, j = i+1, j+1
			case i < len(ma) && (j == len(mb) || lcs[i+1][j] >= lcs[i][j+1]):
				// Removed lines before added ones, as diff(1) shows them.
				ops = append(ops, diffOp{'-', ma[i], head + i, head + j})
				i++
			default:
				ops = append(ops, diffOp{'+', mb[j], head + i, head + j})
				j++
			}
		}
	}
	for k := range tail {
		i, j := len(a)-tail+k, len(b)-tail+k
		ops = append(ops, diffOp{' ', a[i], i, j})
	}
	return ops
}

// splitLines cuts text into lines, without a last empty one for a final
// newline.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
