package server

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// filePutPattern is the one route whose body is not JSON: a person's
// upload is the file's raw bytes, sent as application/octet-stream (see
// checkCrossSite). That type, like JSON, is not one a page can send
// cross-site without a preflight, which this server never grants, and the
// Origin and Sec-Fetch-Site checks apply to it as to every write.
const filePutPattern = "PUT /v1/sessions/{id}/files/{path...}"

// octetStream is the content type of file bodies, both ways.
const octetStream = "application/octet-stream"

// DefaultMaxFileBytes is Config.MaxFileBytes' default: the engine's limit
// on one upload.
const DefaultMaxFileBytes = 32 << 20

// fileRoutes registers the workspace file endpoints.
func (s *Server) fileRoutes() {
	s.handle("GET /v1/sessions/{id}/files", "ListFiles", s.listFiles)
	s.handle("GET /v1/sessions/{id}/files/{path...}", "OpenFile", s.getFile)
	s.handle(filePutPattern, "PutFileIfMatch", s.putFile)
	s.handle("DELETE /v1/sessions/{id}/files/{path...}", "DeleteFileIfMatch", s.deleteFile)
	s.handle("GET /v1/sessions/{id}/checkpoints/{checkpoint_id}/files", "ListFiles", s.listCheckpointFiles)
	s.handle("GET /v1/sessions/{id}/checkpoints/{checkpoint_id}/files/{path...}", "OpenFile", s.getCheckpointFile)
}

// isFileUpload reports whether r goes to filePutPattern.
func (s *Server) isFileUpload(r *http.Request) bool {
	if r.Method != http.MethodPut {
		return false
	}
	_, pattern := s.mux.Handler(r)
	return pattern == filePutPattern
}

// bodyLimit is the most bytes r's body may hold.
func (s *Server) bodyLimit(r *http.Request) int64 {
	if s.isFileUpload(r) {
		return s.cfg.MaxFileBytes
	}
	return s.cfg.MaxBodyBytes
}

// listFiles is GET /v1/sessions/{id}/files?path=DIR.
func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) error {
	l, err := s.b.ListFiles(r.Context(), r.PathValue("id"), "", r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, l)
}

// getFile is GET /v1/sessions/{id}/files/{path}: the bytes, as a download.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) error {
	fe, rc, err := s.b.OpenFile(r.Context(), r.PathValue("id"), "", r.PathValue("path"))
	if err != nil {
		return err
	}
	defer rc.Close()
	writeFile(w, fe, rc, false)
	return nil
}

// putFile is PUT /v1/sessions/{id}/files/{path}[?action_id=act_…]: the
// body is the file's new content; If-Match (the ETag of the download it
// edits) makes it conditional.
func (s *Server) putFile(w http.ResponseWriter, r *http.Request) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return apierror.TooLarge("the file is larger than %d bytes", tooLarge.Limit)
		}
		return apierror.Invalid("", "read request body: %v", err)
	}
	ch, err := s.b.PutFileIfMatch(r.Context(), r.PathValue("id"), r.PathValue("path"), data, r.URL.Query().Get("action_id"), r.Header.Get("If-Match"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ch)
}

// deleteFile is DELETE /v1/sessions/{id}/files/{path}.
func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) error {
	ch, err := s.b.DeleteFileIfMatch(r.Context(), r.PathValue("id"), r.PathValue("path"), r.Header.Get("If-Match"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ch)
}

// listCheckpointFiles is GET /v1/sessions/{id}/checkpoints/{cp}/files?path=.
func (s *Server) listCheckpointFiles(w http.ResponseWriter, r *http.Request) error {
	l, err := s.b.ListFiles(r.Context(), r.PathValue("id"), r.PathValue("checkpoint_id"), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, l)
}

// getCheckpointFile is GET /v1/sessions/{id}/checkpoints/{cp}/files/{path}.
func (s *Server) getCheckpointFile(w http.ResponseWriter, r *http.Request) error {
	fe, rc, err := s.b.OpenFile(r.Context(), r.PathValue("id"), r.PathValue("checkpoint_id"), r.PathValue("path"))
	if err != nil {
		return err
	}
	defer rc.Close()
	writeFile(w, fe, rc, true)
	return nil
}

// writeFile sends a file as a download: application/octet-stream whatever
// it holds (a page never renders an agent's file on the API's origin),
// sandboxed, with its SHA-256 as ETag (the Go client and the CLI check the
// bytes against it). A snapshot's file never changes; a workspace's may.
func writeFile(w http.ResponseWriter, fe *lt.FileEntry, body io.Reader, immutable bool) {
	h := w.Header()
	h.Set("Content-Type", octetStream)
	h.Set("Content-Length", strconv.FormatInt(fe.Size, 10))
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(fe.Path)}))
	h.Set("ETag", strconv.Quote(fe.SHA256))
	if fe.Source != "" {
		// A session on a runner: read from its workspace there, or
		// from a snapshot when that is out of reach.
		h.Set(lt.FilesSourceHeader, fe.Source)
	}
	if fe.FromSnapshot != "" {
		h.Set(lt.FilesSnapshotHeader, fe.FromSnapshot)
	}
	if immutable {
		h.Set("Cache-Control", "private, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, body)
}
