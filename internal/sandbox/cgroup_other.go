//go:build !linux

package sandbox

import "errors"

func findPidsCgroup() (string, error) { return "", errors.New("pids cgroups need Linux") }

type runCgroup struct{}

func newRunCgroup(string, int) (*runCgroup, error) { return nil, errors.New("pids cgroups need Linux") }

func (*runCgroup) procs() string { return "" }

func (*runCgroup) hitMax() bool { return false }

func (*runCgroup) remove() error { return nil }
