package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListArtifacts returns the session's artifacts
// (GET /v1/sessions/{id}/artifacts).
func (c *Client) ListArtifacts(ctx context.Context, sessionID string) (*lt.List[lt.Artifact], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list artifacts: %w", err)
	}
	l, err := get[lt.List[lt.Artifact]](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "artifacts"))
	if err != nil {
		return nil, fmt.Errorf("list artifacts of %s: %w", sessionID, err)
	}
	return l, nil
}

// GetArtifact returns an artifact's metadata (GET /v1/artifacts/{id}).
func (c *Client) GetArtifact(ctx context.Context, id string) (*lt.Artifact, error) {
	if err := requireID("id", id); err != nil {
		return nil, fmt.Errorf("get artifact: %w", err)
	}
	a, err := get[lt.Artifact](ctx, c, c.endpoint(nil, "v1", "artifacts", id))
	if err != nil {
		return nil, fmt.Errorf("get artifact %s: %w", id, err)
	}
	return a, nil
}

// ArtifactContent returns an artifact's bytes and their Content-Type
// (GET /v1/artifacts/{id}/content). Artifacts are content-addressed: when
// the server sends the sha256 as ETag, the bytes are checked against it, so
// a corrupted or truncated download is an error, never a silent bad file.
func (c *Client) ArtifactContent(ctx context.Context, id string) (data []byte, contentType string, err error) {
	if err := requireID("id", id); err != nil {
		return nil, "", fmt.Errorf("artifact content: %w", err)
	}
	resp, err := c.send(ctx, &call{method: http.MethodGet, url: c.endpoint(nil, "v1", "artifacts", id, "content"), accept: "*/*"})
	if err != nil {
		return nil, "", fmt.Errorf("artifact content %s: %w", id, err)
	}
	if want, ok := etagSHA256(resp.header.Get("ETag")); ok {
		if err := checkSHA256(resp.body, want); err != nil {
			return nil, "", fmt.Errorf("artifact content %s: %w", id, err)
		}
	}
	return resp.body, resp.header.Get("Content-Type"), nil
}

// GetBlob returns the content-addressed blob with that sha256
// (GET /v1/blobs/{sha256}); an event whose payload was too large to inline
// points at one (longhaultype.BlobData). The bytes are checked against the
// digest.
func (c *Client) GetBlob(ctx context.Context, sha256Hex string) ([]byte, error) {
	if !isSHA256Hex(sha256Hex) {
		return nil, fmt.Errorf("get blob: sha256Hex %q is not 64 lowercase hex digits", sha256Hex)
	}
	resp, err := c.send(ctx, &call{method: http.MethodGet, url: c.endpoint(nil, "v1", "blobs", sha256Hex), accept: "*/*"})
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", sha256Hex, err)
	}
	if err := checkSHA256(resp.body, sha256Hex); err != nil {
		return nil, fmt.Errorf("get blob %s: %w", sha256Hex, err)
	}
	return resp.body, nil
}

// etagSHA256 extracts a sha256 digest from a strong ETag ("<hex>"); a weak or
// differently shaped ETag is not a digest and is not checked.
func etagSHA256(etag string) (string, bool) {
	if strings.HasPrefix(etag, "W/") {
		return "", false
	}
	d := strings.ToLower(strings.Trim(etag, `"`))
	d = strings.TrimPrefix(d, "sha256:")
	return d, isSHA256Hex(d)
}

func isSHA256Hex(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

func checkSHA256(data []byte, want string) error {
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("content sha256 %s does not match %s (%d bytes received)", got, want, len(data))
	}
	return nil
}
