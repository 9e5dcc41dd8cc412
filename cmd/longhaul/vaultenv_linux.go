package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/longhaul-dev/longhaul/internal/vault"
)

// hideVaultKey runs first in main. When LONGHAUL_VAULT_KEY is set it does
// not return on success: the process continues as a new image of this
// binary whose environment lacks the variable (see vaultKeyFDEnv). It
// returns the key to use: the one read from the pipe in the new image, or,
// when the exec could not be done, the variable's value (then unset: no
// child inherits it, though /proc still shows it, which the returned
// error says).
func hideVaultKey() (key string, err error) {
	if key, ok, err := vaultKeyFromPipe(); ok {
		return key, err
	}
	key = os.Getenv(vault.KeyEnv)
	if key == "" || len(key) > maxVaultKeyLen {
		return key, nil
	}
	_ = os.Unsetenv(vault.KeyEnv)
	if err := reexecWithKeyInPipe(key); err != nil {
		return key, fmt.Errorf("%s stays readable in /proc/%d/environ: %w (use --vault-key-file instead)", vault.KeyEnv, os.Getpid(), err)
	}
	return "", errors.New("unreachable: exec returned without an error")
}

func reexecWithKeyInPipe(key string) error {
	var p [2]int
	// No O_CLOEXEC on the read end: the new image must inherit it. The
	// write end is closed before the exec.
	if err := syscall.Pipe2(p[:], 0); err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	r, w := p[0], p[1]
	_, werr := syscall.Write(w, []byte(key))
	_ = syscall.Close(w)
	if werr != nil {
		_ = syscall.Close(r)
		return fmt.Errorf("write the key to the pipe: %w", werr)
	}
	env := append(environWithout(os.Environ(), vault.KeyEnv), vaultKeyFDEnv+"="+strconv.Itoa(r))
	// /proc/self/exe is this very binary, even if its path changed since.
	err := syscall.Exec("/proc/self/exe", os.Args, env)
	_ = syscall.Close(r)
	return fmt.Errorf("exec: %w", err)
}
