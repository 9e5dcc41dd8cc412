package main

import (
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestCgroupMemoryLimit(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	v1 := "12:pids:/\n4:memory:/box/job\n1:cpu,cpuacct:/\n0::/\n"
	for _, tc := range []struct {
		name  string
		self  string
		files fstest.MapFS
		want  int64
	}{
		{"version 2, the cgroup's own limit", "0::/box/job\n", fstest.MapFS{
			"sys/fs/cgroup/box/job/memory.max": file("536870912\n"),
			"sys/fs/cgroup/box/memory.max":     file("max\n"),
		}, 512 << 20},
		{"version 2, an ancestor's lower limit", "0::/box/job\n", fstest.MapFS{
			"sys/fs/cgroup/box/job/memory.max": file("max\n"),
			"sys/fs/cgroup/box/memory.max":     file("268435456\n"),
		}, 256 << 20},
		{"version 2 in a namespace: the path is missing, the mount's root read", "0::/elsewhere/job\n", fstest.MapFS{
			"sys/fs/cgroup/memory.max": file("1073741824"),
		}, 1 << 30},
		{"version 2, no limit", "0::/box\n", fstest.MapFS{
			"sys/fs/cgroup/box/memory.max": file("max\n"),
			"sys/fs/cgroup/memory.max":     file("max\n"),
		}, 0},
		{"version 1, the memory controller's line", v1, fstest.MapFS{
			"sys/fs/cgroup/memory/box/job/memory.limit_in_bytes": file("2147483648\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":         file("9223372036854771712\n"),
		}, 2 << 30},
		{"version 1, unset: the huge number, which the machine's memory bounds", v1, fstest.MapFS{
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n"),
		}, 9223372036854771712},
		{"hybrid: version 1's limit and version 2's, the lower", v1, fstest.MapFS{
			"sys/fs/cgroup/memory/box/job/memory.limit_in_bytes": file("2147483648\n"),
			"sys/fs/cgroup/memory.max":                           file("1073741824\n"),
		}, 1 << 30},
		{"nothing readable", v1, fstest.MapFS{}, 0},
		{"garbage in the files and the lines", "garbage\n4:memory:relative\n0::/x\n", fstest.MapFS{
			"sys/fs/cgroup/x/memory.max": file("lots"),
			"sys/fs/cgroup/memory.max":   file("-1"),
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, cgroupMemoryLimit(tc.files, tc.self))
		})
	}
}

func TestAvailableMemoryAtMostTheMachines(t *testing.T) {
	t.Parallel()
	var info syscall.Sysinfo_t
	require.NoError(t, syscall.Sysinfo(&info))
	got := availableMemory()
	require.Positive(t, got)
	require.LessOrEqual(t, got, int64(info.Totalram)*int64(info.Unit))
}
