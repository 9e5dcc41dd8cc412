//go:build !linux

package sandbox

import "errors"

func boundMemory(argv []string, limit int64) ([]string, *runCgroup, error) {
	if limit <= 0 {
		return argv, nil, nil
	}
	return argv, nil, errors.New("memory cgroups need Linux")
}

func oomKilled(*runCgroup) bool { return false }

// MemoryBound says whether programs started with StartRequest.MemoryBytes
// are bounded by a memory cgroup here, and if not, why.
func MemoryBound() (bool, string) { return false, "memory cgroups need Linux" }

func startBounded(argv []string, _ *StartRequest) ([]string, *runCgroup) { return argv, nil }
