package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// secretPrefix starts every signing secret (Standard Webhooks).
const secretPrefix = "whsec_"

// NewSecret returns a new signing secret: "whsec_" and the base64 of 24
// random bytes.
func NewSecret() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return secretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// secretKey returns the HMAC key of a "whsec_..." secret: the base64-decoded
// part after the prefix.
func secretKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, errors.New(`secret does not start with "whsec_"`)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("secret is not base64: %w", err)
	}
	if len(key) == 0 {
		return nil, errors.New("secret is empty")
	}
	return key, nil
}

// Sign returns the webhook-signature header value for a message: one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per secret, separated by
// spaces (several secrets during a key rotation).
func Sign(secrets []string, id string, timestamp int64, body []byte) (string, error) {
	if len(secrets) == 0 {
		return "", errors.New("sign webhook: no secret")
	}
	sigs := make([]string, 0, len(secrets))
	for i, s := range secrets {
		key, err := secretKey(s)
		if err != nil {
			return "", fmt.Errorf("sign webhook: secrets[%d]: %w", i, err)
		}
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body)))
	}
	return strings.Join(sigs, " "), nil
}

func mac(key []byte, id string, timestamp int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify reports whether signature (a webhook-signature header value)
// holds a v1 signature of the message by secret. Receivers, and this
// package's tests, use it; it does not check the timestamp's age.
func Verify(secret, id string, timestamp int64, body []byte, signature string) (bool, error) {
	key, err := secretKey(secret)
	if err != nil {
		return false, fmt.Errorf("verify webhook: %w", err)
	}
	want := mac(key, id, timestamp, body)
	for _, part := range strings.Fields(signature) {
		v, sig, ok := strings.Cut(part, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			return true, nil
		}
	}
	return false, nil
}
