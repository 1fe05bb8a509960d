package app

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The start-up error for a kubeconfig the process may not open says who the process
// is, what the file's mode and owner are, and the fix that follows from them: DCM's
// compose mounts the host's kubeconfig (often 0600, the host user's) into an image that
// runs as uid 65532.
func TestKubeconfigDeniedSaysWhyAndTheFix(t *testing.T) {
	image := procFacts{UID: 65532, GID: 65532}
	tests := []struct {
		name    string
		ff      fileFacts
		p       procFacts
		want    []string
		notWant []string
	}{
		{
			name: "host user's 0600 file, rootful engine",
			ff:   fileFacts{Mode: 0o600, UID: 1000, GID: 1000, Owned: true},
			p:    image,
			want: []string{"SP_K8S_KUBECONFIG /kubeconfig: permission denied",
				"mode 0600 owned by uid 1000 gid 1000", "runs as uid 65532 gid 65532",
				"chmod 0644 <file>", "chgrp 65532 <file> and chmod 0640", "chown 65532 <file>", `README "Install > Compose"`},
			notWant: []string{"podman unshare", ":z"},
		},
		{
			name: "host user's 0600 file, rootless podman: the host user is root inside",
			ff:   fileFacts{Mode: 0o600, UID: 0, GID: 0, Owned: true},
			p:    image,
			want: []string{"mode 0600 owned by uid 0 gid 0", "chmod 0644",
				"podman unshare chgrp 65532 <file>", "--userns=keep-id:uid=65532,gid=65532"},
		},
		{
			name: "owner not mapped by the user namespace",
			ff:   fileFacts{Mode: 0o600, UID: overflowID, GID: overflowID, Owned: true},
			p:    image,
			want: []string{"owned by uid 65534", "an owner it does not map"},
		},
		{
			name:    "0640 with another group",
			ff:      fileFacts{Mode: 0o640, UID: 1000, GID: 1000, Owned: true},
			p:       image,
			want:    []string{"mode 0640 owned by uid 1000 gid 1000", "chmod 0644"},
			notWant: []string{"the mode allows"},
		},
		{
			name: "OpenShift-style uid with gid 0 and a 0600 file",
			ff:   fileFacts{Mode: 0o600, UID: 1000, GID: 0, Owned: true},
			p:    procFacts{UID: 1000680000, GID: 0},
			want: []string{"runs as uid 1000680000 gid 0", "readable by uid 1000680000", "chgrp 0 <file> and chmod 0640"},
		},
		{
			name: "0640 with the process's group: the mode allows it, so SELinux",
			ff:   fileFacts{Mode: 0o640, UID: 1000, GID: 65532, Owned: true},
			p:    image,
			want: []string{"which the mode allows", "mount the file with :z", "<file>:/kubeconfig:ro,z"},
		},
		{
			name: "0640 with a supplementary group of the process",
			ff:   fileFacts{Mode: 0o640, UID: 1000, GID: 10, Owned: true},
			p:    procFacts{UID: 65532, GID: 65532, Groups: []int{10}},
			want: []string{"which the mode allows", ":z"},
		},
		{
			name: "0644: the mode allows it",
			ff:   fileFacts{Mode: 0o644, UID: 1000, GID: 1000, Owned: true},
			p:    image,
			want: []string{"mode 0644", "which the mode allows", ":z"},
		},
		{
			name: "owner 65532 with 0600: the mode allows it",
			ff:   fileFacts{Mode: 0o600, UID: 65532, GID: 1000, Owned: true},
			p:    image,
			want: []string{"which the mode allows"},
		},
		{
			name:    "owner 65532 but no owner read bit",
			ff:      fileFacts{Mode: 0o044, UID: 65532, GID: 65532, Owned: true},
			p:       image,
			want:    []string{"mode 0044", "chmod 0644"},
			notWant: []string{"the mode allows"},
		},
		{
			name: "root refused: not the bits",
			ff:   fileFacts{Mode: 0o600, UID: 1000, GID: 1000, Owned: true},
			p:    procFacts{UID: 0, GID: 0},
			want: []string{"runs as uid 0 gid 0", "which the mode allows", ":z"},
		},
		{
			name: "root in a user namespace, owner unmapped: the bits apply",
			ff:   fileFacts{Mode: 0o600, UID: overflowID, GID: overflowID, Owned: true},
			p:    procFacts{UID: 0, GID: 0},
			want: []string{"owned by uid 65534", "chmod 0644"},
		},
		{
			name:    "a directory on the path is not searchable",
			ff:      fileFacts{StatErr: fs.ErrPermission},
			p:       image,
			want:    []string{"runs as uid 65532 gid 65532", "a directory on its path is not searchable", "mount the file itself"},
			notWant: []string{"mode 0"},
		},
		{
			name: "no owner on this platform",
			ff:   fileFacts{Mode: 0o600},
			p:    image,
			want: []string{"mode 0600 and this process runs as uid 65532 gid 65532", "chmod 0644"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := kubeconfigDenied("/kubeconfig", tt.ff, tt.p)
			if strings.Contains(got, "\n") {
				t.Errorf("not one line: %q", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in:\n%s", w, got)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(got, w) {
					t.Errorf("should not say %q:\n%s", w, got)
				}
			}
		})
	}
}

// A missing kubeconfig and an empty setting: the other answers of readable.
func TestReadableKubeconfig(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(ok, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := readable(""); err != nil {
		t.Errorf("empty setting (in-cluster): %v", err)
	}
	if err := readable(ok); err != nil {
		t.Errorf("readable file: %v", err)
	}
	err := readable(filepath.Join(dir, "missing"))
	if err == nil || !strings.Contains(err.Error(), "does not exist") || errors.Is(err, fs.ErrPermission) {
		t.Errorf("missing file: %v", err)
	}
}
