package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/vault"
)

// The vault's key given in LONGHAUL_VAULT_KEY must not stay readable in
// /proc/PID/environ for the server's whole life. Unsetting the variable is
// not enough: Go and libc keep their own copies of the environment, while
// the kernel shows the block the process was started with, which nothing
// rewrites. So main starts the binary again (execve, same pid) with the
// variable removed and the key passed through a pipe whose descriptor
// number is in vaultKeyFDEnv; the new image reads the key, closes the pipe
// and never has it in its environment.
const vaultKeyFDEnv = "LONGHAUL_VAULT_KEY_FD"

// maxVaultKeyLen bounds what goes through the pipe: far more than a key's
// 44 characters, far less than a pipe's buffer, so writing it before the
// exec never blocks. A longer value is not a key; the vault refuses it.
const maxVaultKeyLen = 1024

// vaultKeyFromPipe reads the key the previous image of this process left
// in the pipe named by vaultKeyFDEnv, and closes the pipe. ok is false
// when there is no such variable.
func vaultKeyFromPipe() (key string, ok bool, err error) {
	v, set := os.LookupEnv(vaultKeyFDEnv)
	if !set {
		return "", false, nil
	}
	_ = os.Unsetenv(vaultKeyFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return "", true, fmt.Errorf("%s: %q is not a descriptor this process was given", vaultKeyFDEnv, v)
	}
	f := os.NewFile(uintptr(fd), "vault key")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxVaultKeyLen+1))
	if err != nil {
		return "", true, fmt.Errorf("read the vault key from descriptor %d: %w", fd, err)
	}
	return string(b), true, nil
}

// environWithout returns env without the entries of name.
func environWithout(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// vaultKeyGetenv is os.Getenv, except that it answers vault.KeyEnv with
// key (which is no longer in the environment).
func vaultKeyGetenv(key string) func(string) string {
	return func(name string) string {
		if name == vault.KeyEnv {
			return key
		}
		return os.Getenv(name)
	}
}
