//go:build !linux

package main

import (
	"os"

	"github.com/longhaul-dev/longhaul/internal/vault"
)

// hideVaultKey returns the key from LONGHAUL_VAULT_KEY and unsets the
// variable, so that no child process inherits it. (/proc/PID/environ,
// which keeps the block a process started with, is Linux's.)
func hideVaultKey() (string, error) {
	if key, ok, err := vaultKeyFromPipe(); ok {
		return key, err
	}
	key := os.Getenv(vault.KeyEnv)
	_ = os.Unsetenv(vault.KeyEnv)
	return key, nil
}
