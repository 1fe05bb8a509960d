package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// goBuildEnv is the environment of the service's build: static (no cgo), the toolchain
// on this machine (no download), the service's go.mod alone (GOWORK=off: the workspace
// would raise dependency versions to the tooling's), and the platform's baseline
// instruction set, so what the caller's environment sets cannot change the binary.
func goBuildEnv(p platform) []string {
	env := []string{
		"CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS=",
		"GOOS=" + p.goos, "GOARCH=" + p.goarch, "GOAMD64=v1", "GOARM64=v8.0",
	}
	return append(os.Environ(), env...) // later entries win
}

// goBuildArgs are the flags that make the binary reproducible (-trimpath, -buildvcs=false:
// no paths or checkout state) and small (-s -w), with the version and revision stamped.
func goBuildArgs(o resolved, out string) []string {
	return []string{"build", "-trimpath", "-buildvcs=false",
		"-ldflags", fmt.Sprintf("-s -w -X main.version=%s -X main.revision=%s", o.Version, o.Revision),
		"-o", out, o.Package}
}

// goBuild builds the service for p into dir and returns the binary's path. A failure is
// one line: the platform, the package and go build's own messages joined.
func goBuild(ctx context.Context, o resolved, p platform, dir string) (string, error) {
	out := filepath.Join(dir, p.goos+"_"+p.goarch, "k8s-container-sp")
	cmd := exec.CommandContext(ctx, "go", goBuildArgs(o, out)...)
	cmd.Dir = o.Root
	cmd.Env = goBuildEnv(p)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s for %s in %s failed (%v): %s", o.Package, p, o.Root, err, oneLine(string(msg)))
	}
	return out, nil
}

// oneLine joins go build's output into one line, leaving out its "# package" headers.
func oneLine(s string) string {
	var parts []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "# ") {
			parts = append(parts, l)
		}
	}
	if len(parts) == 0 {
		return "no output"
	}
	return strings.Join(parts, "; ")
}
