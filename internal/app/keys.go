package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// An API key's token is KeyTokenPrefix and KeyTokenBytes random bytes in
// lowercase base32 without padding (52 characters: no character a shell,
// a URL or a double-click splits on). It is stored only as its SHA-256:
// a token this random cannot be guessed from its hash, so a fast hash is
// enough and authentication costs one hash and one indexed read, never a
// password hash's deliberate slowness.
const (
	KeyTokenPrefix = "lh_"
	KeyTokenBytes  = 32
	// keyPrefixLen is how much of a token a list shows (KeyTokenPrefix and
	// 8 characters, 40 bits: enough to tell keys apart, useless to guess).
	keyPrefixLen = len(KeyTokenPrefix) + 8
	// MaxKeyName bounds a key's name (a person's or a program's).
	MaxKeyName = 100
)

var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// HashKeyToken is the stored form of a token: its SHA-256 in lowercase
// hex. The server hashes the bearer token it is given and looks the hash
// up.
func HashKeyToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// newKeyToken returns a fresh token.
func newKeyToken() (string, error) {
	b := make([]byte, KeyTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random key: %w", err)
	}
	return KeyTokenPrefix + keyEncoding.EncodeToString(b), nil
}

// checkCreateKey checks req as API.md gives it, naming the field at fault,
// and fills in the default project.
func checkCreateKey(req *lt.CreateKeyRequest, now time.Time) (*lt.CreateKeyRequest, error) {
	if req == nil {
		return nil, apierror.Invalid("", "the request body is missing")
	}
	out := *req
	if err := checkCallerName(out.Name); err != nil {
		return nil, err
	}
	if !slices.Contains(lt.Roles(), out.Role) {
		return nil, apierror.Invalid("role", "role must be one of %s, got %q", roleNames(), out.Role)
	}
	if out.Project == "" {
		out.Project = lt.DefaultProject
	}
	if err := checkProjectName(out.Project); err != nil {
		return nil, err
	}
	if out.ExpiresAt != nil {
		if !out.ExpiresAt.After(now) {
			return nil, apierror.Invalid("expires_at", "expires_at must be in the future, got %s", out.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if y := out.ExpiresAt.Year(); y > 9999 {
			return nil, apierror.Invalid("expires_at", "expires_at must be before the year 10000")
		}
		exp := out.ExpiresAt.UTC().Truncate(time.Microsecond)
		out.ExpiresAt = &exp
	}
	return &out, nil
}

func roleNames() string {
	names := make([]string, 0, len(lt.Roles()))
	for _, r := range lt.Roles() {
		names = append(names, string(r))
	}
	return strings.Join(names, ", ")
}

// CreateKey implements Service: the answer is the only place the token
// ever appears.
func (a *App) CreateKey(ctx context.Context, req *lt.CreateKeyRequest) (*lt.APIKey, error) {
	if err := Allow(ctx, "CreateKey"); err != nil {
		return nil, err
	}
	now := a.now()
	req, err := checkCreateKey(req, now)
	if err != nil {
		return nil, err
	}
	token, err := newKeyToken()
	if err != nil {
		return nil, err
	}
	row := &store.APIKeyRow{
		ID:        "key_" + strings.ToLower(ulid.MustNew(ulid.Timestamp(now), rand.Reader).String()),
		Name:      req.Name,
		Role:      string(req.Role),
		Project:   req.Project,
		Prefix:    token[:keyPrefixLen],
		TokenHash: HashKeyToken(token),
		CreatedAt: now,
		ExpiresAt: req.ExpiresAt,
	}
	if err := a.store.APIKeyCreate(ctx, row); err != nil {
		return nil, fmt.Errorf("create key: %w", err)
	}
	key := apiKey(row)
	key.Key = token
	return key, nil
}

// ListKeys implements Service: every key, revoked ones included, oldest
// first (a server holds few keys: one page).
func (a *App) ListKeys(ctx context.Context) (*lt.List[lt.APIKey], error) {
	if err := Allow(ctx, "ListKeys"); err != nil {
		return nil, err
	}
	rows, err := a.store.APIKeyList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	keys := make([]lt.APIKey, 0, len(rows))
	for _, r := range rows {
		keys = append(keys, *apiKey(r))
	}
	return list(keys), nil
}

// RevokeKey implements Service. The key stays listed, with its revocation
// time; revoking it again changes nothing.
func (a *App) RevokeKey(ctx context.Context, id string) error {
	if err := Allow(ctx, "RevokeKey"); err != nil {
		return err
	}
	if id == "" {
		return apierror.Invalid("id", "id is required")
	}
	err := a.store.APIKeyRevoke(ctx, id, a.now())
	if errors.Is(err, store.ErrNotFound) {
		return apierror.NotFound("API key %s not found", id)
	}
	if err != nil {
		return fmt.Errorf("revoke key %s: %w", id, err)
	}
	return nil
}

// apiKey is the wire form of r, without the token (which is not stored).
func apiKey(r *store.APIKeyRow) *lt.APIKey {
	return &lt.APIKey{
		ID:         r.ID,
		Name:       r.Name,
		Role:       lt.Role(r.Role),
		Project:    r.Project,
		Prefix:     r.Prefix,
		CreatedAt:  r.CreatedAt,
		LastUsedAt: r.LastUsedAt,
		ExpiresAt:  r.ExpiresAt,
		RevokedAt:  r.RevokedAt,
	}
}
