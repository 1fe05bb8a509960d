package imageregistry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
)

// New is the registry serving at self ("127.0.0.1:PORT"), its blobs under blobDir, one
// line per request to logw.
func New(self, blobDir string, logw io.Writer) http.Handler {
	var mu sync.Mutex // one writer for both loggers: lines never interleave
	lw := &lockedWriter{mu: &mu, w: logw}
	inner := ggcr.New(ggcr.Logger(log.New(lw, "", log.LstdFlags)), ggcr.WithBlobHandler(ggcr.NewDiskBlobHandler(blobDir)))
	logger := log.New(lw, "", log.LstdFlags)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns := r.URL.Query().Get("ns")
		rewritten, ok := MirrorPath(r.URL.Path, ns, self)
		if !ok {
			inner.ServeHTTP(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		q := r2.URL.Query()
		q.Del("ns")
		r2.URL.Path, r2.URL.RawPath, r2.URL.RawQuery = rewritten, "", q.Encode()
		if !isManifestRead(r2) {
			inner.ServeHTTP(w, r2)
			return
		}
		// containerd tells a registry's 404 as a bare "not found", without the host it
		// asked; a 403 names it ("pulling from host 127.0.0.1:PORT failed ... 403"), so a
		// pod's ErrImagePull says where the image was looked for.
		rec := &bufferedResponse{header: http.Header{}}
		inner.ServeHTTP(rec, r2)
		if rec.status != http.StatusNotFound {
			rec.replay(w)
			return
		}
		ref := Requested(rewritten)
		msg := fmt.Sprintf("%s is not in this machine's image registry %s: the real node pulls only from there (push it: sp-harness push-image IMAGE.tar %s)", ref, self, ref)
		logger.Printf("%s %s (a pull of %s) refused: not here", r.Method, r.URL, ref)
		writeDenied(w, msg)
	})
}

// MirrorPath maps a containerd mirror request for another registry's repository to the
// repository it is kept under here: /v2/REPO/... with ns=HOST becomes /v2/HOST/REPO/...
// ok is false when path is not such a request (no ns, ns is this registry, not /v2/REPO).
func MirrorPath(path, ns, self string) (string, bool) {
	rest, isV2 := strings.CutPrefix(path, "/v2/")
	if ns == "" || ns == self || !isV2 || rest == "" {
		return path, false
	}
	return "/v2/" + ns + "/" + rest, true
}

// Requested is the image reference a manifest path asks for, e.g.
// /v2/docker.io/library/nginx/manifests/alpine -> docker.io/library/nginx:alpine.
func Requested(path string) string {
	repo, ref, ok := strings.Cut(strings.TrimPrefix(path, "/v2/"), "/manifests/")
	if !ok {
		return path
	}
	if strings.Contains(ref, ":") { // a digest
		return repo + "@" + ref
	}
	return repo + ":" + ref
}

// LocalName is where an image called ref (as a pod names it) is kept in the registry at
// self: its registry host becomes the first path element, e.g. nginx:alpine ->
// 127.0.0.1:PORT/docker.io/library/nginx:alpine. An image named after this registry
// itself (127.0.0.1:PORT/team/app:v1) stays as it is.
func LocalName(ref, self string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("%q is not an image reference: %w", ref, err)
	}
	host := r.Context().RegistryStr()
	if host == self {
		return r, nil
	}
	if host == name.DefaultRegistry { // go-containerregistry's index.docker.io is containerd's docker.io
		host = "docker.io"
	}
	local := self + "/" + host + "/" + r.Context().RepositoryStr()
	if d, ok := r.(name.Digest); ok {
		return name.NewDigest(local+"@"+d.DigestStr(), name.Insecure)
	}
	return name.NewTag(local+":"+r.Identifier(), name.Insecure)
}

func isManifestRead(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.Contains(r.URL.Path, "/manifests/")
}

func writeDenied(w http.ResponseWriter, msg string) {
	type regErr struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Errors []regErr `json:"errors"`
	}{[]regErr{{Code: "DENIED", Message: msg}}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write(b)
}

// bufferedResponse holds a manifest answer (small) until it is known not to be a 404.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedResponse) replay(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	if b.status == 0 {
		b.status = http.StatusOK
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body.Bytes())
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
