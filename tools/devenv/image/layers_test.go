package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"strings"
	"testing"
)

// header is what a test checks of a tar entry.
type header struct {
	name     string
	typeflag byte
	mode     int64
	size     int64
}

// readTar is r's entries, each checked to be at the epoch with owner 0:0 and no names;
// the content of each regular file goes to each file, when given.
func readTar(t *testing.T, r io.Reader, eachFile func([]byte)) []header {
	t.Helper()
	var out []header
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.ModTime.Unix() != 0 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || len(h.PAXRecords) > 0 {
			t.Errorf("%s: mtime %v, owner %d:%d (%q:%q), PAX %v; want the epoch, 0:0, no names, no PAX",
				h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname, h.PAXRecords)
		}
		if eachFile != nil && h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			eachFile(b)
		}
		out = append(out, header{h.Name, h.Typeflag, h.Mode, h.Size})
	}
}

func TestTarBytes(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
		want    []header
		wantErr string
	}{
		{name: "sorted whatever the order given", entries: []entry{
			file("tmp2", 0o600, []byte("x")), dir("tmp", 0o777|fs.ModeSticky), dir("etc", 0o755), file("etc/passwd", 0o644, []byte("abc")),
		}, want: []header{
			{"etc/", tar.TypeDir, 0o755, 0}, {"etc/passwd", tar.TypeReg, 0o644, 3}, {"tmp/", tar.TypeDir, 0o1777, 0}, {"tmp2", tar.TypeReg, 0o600, 1},
		}},
		{name: "the base layer", entries: baseEntries([]byte("PEM")), want: []header{
			{"etc/", tar.TypeDir, 0o755, 0},
			{"etc/group", tar.TypeReg, 0o644, int64(len(group))},
			{"etc/passwd", tar.TypeReg, 0o644, int64(len(passwd))},
			{"etc/ssl/", tar.TypeDir, 0o755, 0},
			{"etc/ssl/certs/", tar.TypeDir, 0o755, 0},
			{"etc/ssl/certs/ca-certificates.crt", tar.TypeReg, 0o644, 3},
			{"tmp/", tar.TypeDir, 0o1777, 0},
		}},
		{name: "the binary layer", entries: binaryEntries([]byte("ELF")), want: []header{{"k8s-container-sp", tar.TypeReg, 0o755, 3}}},
		{name: "empty", entries: nil},
		{name: "absolute path", entries: []entry{file("/etc/passwd", 0o644, nil)}, wantErr: "clean relative path"},
		{name: "dot dot", entries: []entry{file("etc/../passwd", 0o644, nil)}, wantErr: "clean relative path"},
		{name: "twice", entries: []entry{dir("etc", 0o755), dir("etc", 0o700)}, wantErr: `"etc/" twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tarBytes(tc.entries)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := readTar(t, bytes.NewReader(b), nil)
			if len(got) != len(tc.want) {
				t.Fatalf("entries %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("entry %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			again, _ := tarBytes(tc.entries)
			if !bytes.Equal(b, again) {
				t.Error("the same entries gave different bytes")
			}
		})
	}
}

// The users a numeric USER and runAsNonRoot rely on.
func TestPasswdAndGroup(t *testing.T) {
	for _, want := range []string{"root:x:0:0:", "nonroot:x:65532:65532:"} {
		if !strings.Contains(passwd, "\n"+want) && !strings.HasPrefix(passwd, want) {
			t.Errorf("/etc/passwd lacks %q", want)
		}
	}
	for _, want := range []string{"root:x:0:", "nonroot:x:65532:"} {
		if !strings.Contains(group, want) {
			t.Errorf("/etc/group lacks %q", want)
		}
	}
}

// A layer's gzip stream has no time or name in its header and the same input gives the
// same bytes.
func TestGzipBytes(t *testing.T) {
	for _, in := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("k8s-container-sp "), 10000)} {
		a, err := gzipBytes(in)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := gzipBytes(in)
		if !bytes.Equal(a, b) {
			t.Errorf("%d bytes: two compressions differ", len(in))
		}
		zr, err := gzip.NewReader(bytes.NewReader(a))
		if err != nil {
			t.Fatal(err)
		}
		if !zr.ModTime.IsZero() || zr.Name != "" || zr.Comment != "" {
			t.Errorf("gzip header has time %v, name %q, comment %q", zr.ModTime, zr.Name, zr.Comment)
		}
		out, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(out, in) {
			t.Errorf("%d bytes: round trip gave %d bytes, %v", len(in), len(out), err)
		}
	}
}
