package server

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
)

// listArtifacts is GET /v1/sessions/{id}/artifacts.
func (s *Server) listArtifacts(w http.ResponseWriter, r *http.Request) error {
	artifacts, err := s.b.ListArtifacts(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, artifacts)
}

// getArtifact is GET /v1/artifacts/{id}: the artifact's metadata.
func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request) error {
	a, err := s.b.GetArtifact(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a)
}

// artifactContent is GET /v1/artifacts/{id}/content: the bytes, with the
// artifact's Content-Type and ETag "<sha256>". An If-None-Match naming that
// digest is a 304, decided from the metadata without loading the bytes.
func (s *Server) artifactContent(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	meta, err := s.b.GetArtifact(r.Context(), id)
	if err != nil {
		return err
	}
	if etagMatch(r.Header.Get("If-None-Match"), meta.SHA256) {
		notModified(w, meta.SHA256)
		return nil
	}
	a, data, err := s.b.ArtifactContent(r.Context(), id)
	if err != nil {
		return err
	}
	writeContent(w, contentType(a.ContentType), a.SHA256, data)
	return nil
}

// getBlob is GET /v1/blobs/{sha256}: content-addressed bytes (large event
// payloads, snapshots). The digest is the ETag.
func (s *Server) getBlob(w http.ResponseWriter, r *http.Request) error {
	digest := strings.ToLower(r.PathValue("sha256"))
	if !isSHA256Hex(digest) {
		return apierror.Invalid("sha256", "blob id must be a SHA-256 digest (64 hex digits), got %s", quoteField(r.PathValue("sha256")))
	}
	if etagMatch(r.Header.Get("If-None-Match"), digest) {
		notModified(w, digest)
		return nil
	}
	data, err := s.b.GetBlob(r.Context(), digest)
	if err != nil {
		return err
	}
	writeContent(w, "application/octet-stream", digest, data)
	return nil
}

// writeContent sends stored bytes. What an agent wrote is served with its
// own content type but sandboxed (Content-Security-Policy: sandbox, nosniff
// set by ServeHTTP), so an HTML artifact cannot run as a page of the API's
// origin. The bytes behind an id never change, so caches may keep them.
func writeContent(w http.ResponseWriter, ctype, digest string, data []byte) {
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Content-Security-Policy", "sandbox")
	setCacheHeaders(h, digest)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func notModified(w http.ResponseWriter, digest string) {
	setCacheHeaders(w.Header(), digest)
	w.WriteHeader(http.StatusNotModified)
}

func setCacheHeaders(h http.Header, digest string) {
	h.Set("ETag", strconv.Quote(digest))
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
}

// contentType returns ct if it is a valid media type, else
// application/octet-stream: a malformed type is not passed on to browsers.
func contentType(ct string) string {
	if ct == "" {
		return "application/octet-stream"
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return "application/octet-stream"
	}
	return ct
}

// etagMatch reports whether an If-None-Match header value names digest (or
// is "*"). If-None-Match uses the weak comparison (RFC 9110 §13.1.2), so a
// W/ prefix is ignored.
func etagMatch(header, digest string) bool {
	if header == "" || digest == "" {
		return false
	}
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" {
			return true
		}
		tag = strings.TrimPrefix(tag, "W/")
		if len(tag) >= 2 && tag[0] == '"' && tag[len(tag)-1] == '"' && tag[1:len(tag)-1] == digest {
			return true
		}
	}
	return false
}

// isSHA256Hex reports whether s is 64 lowercase hex digits.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
