package chaos

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

func TestBugBuildFlags(t *testing.T) {
	cases := []struct {
		name    string
		want    []string
		wantErr bool
	}{
		{"drop-unsent-deleted", []string{"-tags", "chaosbug"}, false},
		{"no-such-bug", nil, true},
		{"", nil, true},
	}
	for _, c := range cases {
		got, err := bugBuildFlags(c.name)
		if (err != nil) != c.wantErr || !slices.Equal(got, c.want) {
			t.Errorf("bugBuildFlags(%q) = %q, %v; want %q, error %v", c.name, got, err, c.want, c.wantErr)
		}
	}
}

// Every planted bug still builds into the service: a seam that no longer compiles
// would only show when someone runs sp-chaos -inject.
func TestEveryBugBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the service once per bug (skipped with -short)")
	}
	for name := range bugs {
		flags, err := bugBuildFlags(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := harness.BuildService(context.Background(), filepath.Join(t.TempDir(), "sp"), flags...); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
