package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is the time of every tar entry and of the config: a build's time must not change
// its digest.
var epoch = time.Unix(0, 0).UTC()

// entry is one file or folder of a layer. Owner is always 0:0: the image's files belong
// to root and the nonroot user only reads them (and writes /tmp, which is 1777).
type entry struct {
	name string      // path without the leading slash; a folder ends in "/"
	mode fs.FileMode // permission bits plus ModeSticky for /tmp
	data []byte      // nil for a folder
}

func dir(name string, mode fs.FileMode) entry { return entry{name: name + "/", mode: mode} }

func file(name string, mode fs.FileMode, data []byte) entry {
	return entry{name: name, mode: mode, data: data}
}

// tarBytes writes entries as a tar sorted by name, each at the epoch with owner 0:0 and
// no user or group names, in the USTAR format (no PAX records with access times), so the
// same entries always give the same bytes.
func tarBytes(entries []entry) ([]byte, error) {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, e := range sorted {
		if e.name == "" || strings.HasPrefix(e.name, "/") || path.Clean(strings.TrimSuffix(e.name, "/")) != strings.TrimSuffix(e.name, "/") {
			return nil, fmt.Errorf("tar entry %q: want a clean relative path", e.name)
		}
		if i > 0 && sorted[i-1].name == e.name {
			return nil, fmt.Errorf("tar entry %q twice", e.name)
		}
		h := &tar.Header{
			Name:    e.name,
			Mode:    int64(e.mode.Perm()),
			ModTime: epoch,
			Format:  tar.FormatUSTAR,
		}
		if e.mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar entry %q: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gzipBytes compresses b with compress/gzip, whose output depends only on the input and
// level (the header's time and name are left empty), not on ggcr's choice of compressor.
// The default level: the best one made the binary's layer 0.4% smaller in 2.5 times the
// time (12.29 against 12.25 MB, 2.3 s against 5.7 s).
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// layerOf is an OCI gzip layer holding entries. ggcr sees compressed bytes and keeps
// them as they are: the digest is that of our gzip stream.
func layerOf(entries []entry) (v1.Layer, error) {
	raw, err := tarBytes(entries)
	if err != nil {
		return nil, err
	}
	gz, err := gzipBytes(raw)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// The nonroot user is distroless's (65532, the Containerfile's base); its home is
// /nonexistent (Debian's convention) because the service writes no files there and a
// folder owned by 65532 would break the image's owner-0 rule.
const (
	nonRootUID = 65532
	passwd     = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n"
	group      = "root:x:0:\nnonroot:x:65532:\n"
	binaryPath = "/k8s-container-sp"
)

// baseEntries are layer 1: the same for every platform.
func baseEntries(caPEM []byte) []entry {
	return []entry{
		dir("etc", 0o755),
		file("etc/group", 0o644, []byte(group)),
		file("etc/passwd", 0o644, []byte(passwd)),
		dir("etc/ssl", 0o755),
		dir("etc/ssl/certs", 0o755),
		file("etc/ssl/certs/ca-certificates.crt", 0o644, caPEM),
		dir("tmp", 0o777|fs.ModeSticky),
	}
}

// binaryEntries are layer 2: the platform's binary.
func binaryEntries(bin []byte) []entry {
	return []entry{file(strings.TrimPrefix(binaryPath, "/"), 0o755, bin)}
}
