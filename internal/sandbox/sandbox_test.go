package sandbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

func TestLimitsDefaults(t *testing.T) {
	t.Parallel()
	l, err := Limits{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, Limits{
		CPUSeconds: DefaultCPUSeconds, MemoryBytes: DefaultMemoryBytes, Processes: DefaultProcesses,
		OutputBytes: DefaultOutputBytes, Wall: DefaultWall, FileBytes: DefaultFileBytes, TmpBytes: DefaultTmpBytes,
		ShmBytes: DefaultShmBytes, DiskBytes: DefaultDiskBytes,
	}, l)
	l, err = Limits{CPUSeconds: 5, Wall: time.Second}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 5, l.CPUSeconds)
	require.Equal(t, time.Second, l.Wall)

	for field, lim := range map[string]Limits{
		"limits.cpu_seconds":  {CPUSeconds: -1},
		"limits.memory_bytes": {MemoryBytes: -1},
		"limits.processes":    {Processes: -1},
		"limits.output_bytes": {OutputBytes: -1},
		"limits.wall":         {Wall: -1},
		"limits.file_bytes":   {FileBytes: -1},
		"limits.tmp_bytes":    {TmpBytes: -1},
		"limits.shm_bytes":    {ShmBytes: -1},
		"limits.disk_bytes":   {DiskBytes: -1},
	} {
		_, err := lim.withDefaults()
		require.ErrorContains(t, err, field)
	}
}

func TestCheckRequest(t *testing.T) {
	t.Parallel()
	lim, err := Limits{Wall: time.Minute}.withDefaults()
	require.NoError(t, err)
	timeout, maxOut, err := checkRequest(&tool.ExecRequest{Command: "true"}, lim)
	require.NoError(t, err)
	require.Equal(t, DefaultTimeout, timeout)
	require.Equal(t, DefaultMaxOutputBytes, maxOut)
	timeout, _, err = checkRequest(&tool.ExecRequest{Command: "true", Timeout: time.Hour}, lim)
	require.NoError(t, err)
	require.Equal(t, time.Minute, timeout, "Limits.Wall caps the request")

	for want, req := range map[string]*tool.ExecRequest{
		"request: is nil":          nil,
		"request.command":          {},
		"NUL":                      {Command: "a\x00b"},
		"request.timeout":          {Command: "true", Timeout: -1},
		"request.max_output_bytes": {Command: "true", MaxOutputBytes: -1},
		"request.env":              {Command: "true", Env: map[string]string{"": "x"}},
		"request.env.A":            {Command: "true", Env: map[string]string{"A": "x\x00"}},
	} {
		_, _, err := checkRequest(req, lim)
		require.ErrorContains(t, err, want)
	}
}

func TestCaptureBudget(t *testing.T) {
	t.Parallel()
	fired := 0
	budget := &outputBudget{left: 10, exceeded: func() { fired++ }}
	a, b := newCapture(6, budget), newCapture(6, budget)
	_, _ = a.Write([]byte("12345"))
	_, _ = b.Write([]byte("abcde"))
	require.Zero(t, fired)
	require.False(t, budget.exceededLimit())
	_, _ = b.Write([]byte("fgh"))
	_, _ = a.Write([]byte("6"))
	require.Equal(t, 1, fired, "the limit fires once")
	require.True(t, budget.exceededLimit())
	text, truncated := b.Text()
	require.True(t, truncated)
	require.Equal(t, "abc\n[... 2 bytes truncated ...]\nfgh", text)
	text, truncated = a.Text()
	require.False(t, truncated, "each capture keeps its own head and tail")
	require.Equal(t, "123456", text)

	// Multi-byte characters are never split.
	c := newCapture(5, &outputBudget{left: 1 << 20, exceeded: func() {}})
	_, _ = c.Write([]byte("ééééé"))
	text, _ = c.Text()
	require.Equal(t, "é\n[... 6 bytes truncated ...]\né", text)
}
