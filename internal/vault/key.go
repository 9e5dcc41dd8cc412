package vault

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Key material.
const (
	// KeySize is the length of a vault key: AES-256.
	KeySize = 32
	// KeyEnv is the environment variable that may hold the key (base64).
	KeyEnv = "LONGHAUL_VAULT_KEY"
	// DefaultKeyFile is the key file's name in the data directory.
	DefaultKeyFile = "vault.key"
)

// LoadKey returns the vault key: from env (the value of LONGHAUL_VAULT_KEY)
// when it is not empty, else from keyFile, which is created with a new random
// key (mode 0600, its directory 0700) when it does not exist. Both hold the
// key as base64 of 32 bytes. A key file that other users can read is refused.
// Errors never contain key material.
func LoadKey(env, keyFile string) ([]byte, error) {
	if strings.TrimSpace(env) != "" {
		key, err := decodeKey(env)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", KeyEnv, err)
		}
		return key, nil
	}
	if keyFile == "" {
		return nil, fmt.Errorf("no vault key: set %s or give a key file", KeyEnv)
	}
	key, err := readKeyFile(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return createKeyFile(keyFile)
	}
	return key, err
}

// decodeKey parses the base64 of a key (standard or URL alphabet, padded or
// not).
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(s); err == nil {
			if len(key) != KeySize {
				return nil, fmt.Errorf("the key must be %d bytes, got %d (make one with `openssl rand -base64 32`)", KeySize, len(key))
			}
			return key, nil
		}
	}
	return nil, errors.New("the key is not valid base64 (make one with `openssl rand -base64 32`)")
}

func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open vault key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat vault key file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("vault key file %s is not a regular file", path)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("vault key file %s can be read by other users (mode %04o): run chmod 600 on it", path, st.Mode().Perm())
	}
	// A key is 44 characters of base64; a much larger file is not a key file.
	data, err := io.ReadAll(io.LimitReader(f, 1024))
	if err != nil {
		return nil, fmt.Errorf("read vault key file %s: %w", path, err)
	}
	key, err := decodeKey(string(data))
	if err != nil {
		return nil, fmt.Errorf("vault key file %s: %w", path, err)
	}
	return key, nil
}

// createKeyFile writes a new random key to path. The file appears whole or
// not at all (written aside, then linked into place), and a key file
// created concurrently by another process wins: its key is returned.
func createKeyFile(path string) ([]byte, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create vault key directory: %w", err)
	}
	key := make([]byte, KeySize)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	tmp, err := os.CreateTemp(dir, ".vault-key-*")
	if err != nil {
		return nil, fmt.Errorf("create vault key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	write := func() error {
		if err := tmp.Chmod(0o600); err != nil {
			return err
		}
		if _, err := tmp.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
			return err
		}
		if err := tmp.Sync(); err != nil {
			return err
		}
		return tmp.Close()
	}
	if err := write(); err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("write vault key file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readKeyFile(path)
		}
		return nil, fmt.Errorf("install vault key file %s: %w", path, err)
	}
	syncDir(dir)
	return key, nil
}

// syncDir makes a new directory entry durable where the platform allows it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// keyID names a key without revealing it: the first 8 bytes of an HMAC of a
// fixed label under the key.
func keyID(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("longhaul vault key id v1"))
	return "k_" + hex.EncodeToString(m.Sum(nil)[:8])
}
