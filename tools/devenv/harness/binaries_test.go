package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// The tooling finds its checkout wherever it runs from: the tool modules and the
// service's sources are relative to it.
func TestRepoRootFromAnyWorkingDirectory(t *testing.T) {
	for _, wd := range []string{".", t.TempDir()} {
		t.Run(wd, func(t *testing.T) {
			t.Chdir(wd)
			root, err := harness.RepoRoot()
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"go.mod", "cmd/k8s-container-sp", "tools/kubernetes/go.mod", "tools/devenv/go.mod"} {
				if _, err := os.Stat(filepath.Join(root, want)); err != nil {
					t.Errorf("%s has no %s: %v", root, want, err)
				}
			}
			tools, err := harness.ToolsDir()
			if err != nil || tools != filepath.Join(root, "tools") {
				t.Errorf("ToolsDir = %q, %v; want %s/tools", tools, err, root)
			}
		})
	}
}

// BuildService builds the service module on its own (GOWORK=off), as the image does.
func TestBuildService(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the service binary (skipped with -short)")
	}
	bin := filepath.Join(t.TempDir(), "k8s-container-sp")
	if err := harness.BuildService(context.Background(), bin); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("no executable at %s: %v", bin, err)
	}
}
