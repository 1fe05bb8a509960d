package imageregistry

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Local is this registry served in the calling process on 127.0.0.1, for a service to
// resolve images through (SP_IMAGE_MIRRORS=*=http://Addr) where no node pulls them.
type Local struct {
	// Addr is 127.0.0.1:PORT.
	Addr string
	srv  *http.Server
}

// StartLocal serves a registry with its blobs under blobDir; wrap, if set, wraps its
// handler (a test's authentication, a request counter).
func StartLocal(blobDir string, wrap func(http.Handler) http.Handler) (*Local, error) {
	if err := os.MkdirAll(blobDir, 0o755); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Local{Addr: ln.Addr().String()}
	h := New(l.Addr, blobDir, io.Discard)
	if wrap != nil {
		h = wrap(h)
	}
	l.srv = &http.Server{Handler: h}
	go func() { _ = l.srv.Serve(ln) }()
	return l, nil
}

// Push puts img under ref (as pods name it) and returns its digest.
func (l *Local) Push(ctx context.Context, ref string, img v1.Image) (string, error) {
	return PushImage(ctx, img, ref, l.Addr)
}

// PushImage puts img under ref (as pods name it) in the registry at self and returns
// its digest.
func PushImage(ctx context.Context, img v1.Image, ref, self string) (string, error) {
	dst, err := LocalName(ref, self)
	if err != nil {
		return "", err
	}
	if err := remote.Write(dst, img, remote.WithContext(ctx)); err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// PushRandom pushes a small random image under ref: where no node pulls it, any image
// resolves as well as a real one.
func (l *Local) PushRandom(ctx context.Context, ref string) (string, error) {
	img, err := random.Image(1024, 1)
	if err != nil {
		return "", err
	}
	return l.Push(ctx, ref, img)
}

// Close stops serving.
func (l *Local) Close() error { return l.srv.Close() }
