package harness

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Versions of the control-plane parts. They must match the pins in tools/*/go.mod.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.6.16"
	KwokVersion       = "v0.8.0"
	// RegistryVersion is DCM's service-provider-manager, the registry providers talk to.
	RegistryVersion = "v0.1.0-rc.1"
	// KubeNetworkPoliciesVersion is sigs.k8s.io/kube-network-policies, the real node's
	// NetworkPolicy implementation (tools/kube-network-policies).
	KubeNetworkPoliciesVersion = "v0.8.0"
)

// Binaries are the paths of the built control-plane programs.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Scheduler, Kwok string
	// Registry is DCM's service-provider-manager.
	Registry string
	// KwokStages holds kwok's own default stage YAML copied from the module it was built
	// from, so the stages always match the binary.
	KwokStages string
}

// tool is one `go build` of a separate tool module under tools/.
type tool struct {
	module  string // folder under tools/
	name    string // cache folder name when it differs from module (the kubelet)
	version string
	pkgs    []string
	ldflags string
	cgo     bool // the registry needs cgo for SQLite
}

// binName is the file a package builds to: its last path element, skipping a major
// version suffix, except etcd whose main package is its module root (".../server/v3").
func binName(pkg string) string {
	if pkg == "go.etcd.io/etcd/server/v3" {
		return "etcd"
	}
	return path.Base(pkg)
}

// cacheName is the tool's folder in the binary cache.
func (t tool) cacheName() string {
	if t.name != "" {
		return t.name + "-" + t.version
	}
	return t.module + "-" + t.version
}

// kubernetesLdflags stamp the version the way Kubernetes' own build does. The kubelet uses
// the same flags (and -trimpath, CGO_ENABLED=0) as the control plane so the two builds
// share the Go build cache.
const kubernetesLdflags = "-s -w -X k8s.io/component-base/version.gitVersion=" + KubernetesVersion +
	" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" +
	" -X k8s.io/component-base/version.gitTreeState=clean"

var tools = []tool{
	{module: "etcd", version: EtcdVersion, pkgs: []string{"go.etcd.io/etcd/server/v3"}, ldflags: "-s -w"},
	{module: "kubernetes", version: KubernetesVersion, pkgs: []string{
		"k8s.io/kubernetes/cmd/kube-apiserver",
		"k8s.io/kubernetes/cmd/kube-controller-manager",
		"k8s.io/kubernetes/cmd/kube-scheduler",
	}, ldflags: kubernetesLdflags},
	{module: "kwok", version: KwokVersion, pkgs: []string{"sigs.k8s.io/kwok/cmd/kwok"},
		ldflags: "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=" + KwokVersion},
	{module: "registry", version: RegistryVersion, cgo: true, ldflags: "-s -w",
		pkgs: []string{"github.com/dcm-project/service-provider-manager/cmd/service-provider-manager"}},
}

// kubeletTool is built only when a real node is asked for (EnsureKubelet): the plain
// control plane never needs it, and a cold build takes 10-25 minutes on 2 CPUs. It comes
// from the same tools/kubernetes module graph as the control plane.
var kubeletTool = tool{module: "kubernetes", name: "kubelet", version: KubernetesVersion,
	pkgs: []string{"k8s.io/kubernetes/cmd/kubelet"}, ldflags: kubernetesLdflags}

// CacheDir is where built binaries live: a per-user folder shared by every checkout, so a
// cold build happens once per machine and version. SP_HARNESS_CACHE overrides it.
func CacheDir() (string, error) {
	if d := os.Getenv("SP_HARNESS_CACHE"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "k8s-container-sp"), nil
}

// ServiceModule is the module path of the service, the repository's root module.
const ServiceModule = "github.com/dcm-project/k8s-container-sp"

// ToolsDir is the repository's tools/ folder (the pinned tool modules the harness builds
// from): SP_HARNESS_TOOLS_DIR, else RepoRoot's tools/.
func ToolsDir() (string, error) {
	if d := os.Getenv("SP_HARNESS_TOOLS_DIR"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "tools"), nil
}

// RepoRoot finds the k8s-container-sp checkout this tooling belongs to: the folder whose
// go.mod is the service's module and which holds tools/kubernetes. It looks relative to
// this source file first (go test and go run keep source paths; this file is
// tools/devenv/harness/binaries.go), then in the working directory and its parents, so
// the commands work from anywhere in the checkout.
func RepoRoot() (string, error) {
	var candidates []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "..", ".."))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			candidates = append(candidates, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, c := range candidates {
		if isRepoRoot(c) {
			return filepath.Clean(c), nil
		}
	}
	return "", errors.New("cannot find the k8s-container-sp checkout (a go.mod of module " + ServiceModule +
		" beside tools/kubernetes): run from inside it")
}

func isRepoRoot(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "tools", "kubernetes", "go.mod")); err != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && strings.Contains(string(b), "module "+ServiceModule+"\n")
}

// BuildService builds the service binary (./cmd/k8s-container-sp of RepoRoot) to bin,
// with extra `go build` flags (e.g. -tags, -overlay). It builds the service module on
// its own (GOWORK=off), exactly as the Containerfile does: what runs is what ships.
func BuildService(ctx context.Context, bin string, flags ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	args := append(append([]string{"build"}, flags...), "-o", bin, "./cmd/k8s-container-sp")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// EnsureBinaries builds whatever is missing from the cache and returns the paths. Progress
// goes to out, because a cold build takes minutes and must not look like a hang. A file
// lock makes concurrent callers (parallel test binaries) wait for one build.
func EnsureBinaries(ctx context.Context, out io.Writer) (*Binaries, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	binDir := filepath.Join(cache, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(filepath.Join(cache, "build.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	var toolsDir string
	for _, t := range tools {
		dir := filepath.Join(binDir, t.cacheName())
		if haveAll(dir, t.pkgs) {
			continue
		}
		if toolsDir == "" {
			if toolsDir, err = ToolsDir(); err != nil {
				return nil, err
			}
		}
		if err := build(ctx, out, filepath.Join(toolsDir, t.module), dir, t); err != nil {
			return nil, err
		}
	}
	kwokDir := filepath.Join(binDir, "kwok-"+KwokVersion)
	stages := filepath.Join(kwokDir, "stages")
	if _, err := os.Stat(stages); err != nil {
		if toolsDir == "" {
			if toolsDir, err = ToolsDir(); err != nil {
				return nil, err
			}
		}
		if err := copyKwokStages(ctx, filepath.Join(toolsDir, "kwok"), stages); err != nil {
			return nil, err
		}
	}
	k8s := filepath.Join(binDir, "kubernetes-"+KubernetesVersion)
	return &Binaries{
		Etcd:              filepath.Join(binDir, "etcd-"+EtcdVersion, "etcd"),
		APIServer:         filepath.Join(k8s, "kube-apiserver"),
		ControllerManager: filepath.Join(k8s, "kube-controller-manager"),
		Scheduler:         filepath.Join(k8s, "kube-scheduler"),
		Kwok:              filepath.Join(kwokDir, "kwok"),
		KwokStages:        stages,
		Registry:          filepath.Join(binDir, "registry-"+RegistryVersion, "service-provider-manager"),
	}, nil
}

// EnsureKubelet builds the kubelet into the cache when it is missing (progress and the
// build time go to out; the same file lock as EnsureBinaries) and returns its path.
func EnsureKubelet(ctx context.Context, out io.Writer) (string, error) {
	return ensureTool(ctx, out, kubeletTool)
}

// ensureTool builds a one-program tool into the cache when it is missing, under the
// build lock, and returns the program's path.
func ensureTool(ctx context.Context, out io.Writer, t tool) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(cache, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	dir := filepath.Join(binDir, t.cacheName())
	bin := filepath.Join(dir, binName(t.pkgs[0]))
	if haveAll(dir, t.pkgs) {
		return bin, nil
	}
	unlock, err := lockFile(filepath.Join(cache, "build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if haveAll(dir, t.pkgs) { // built by another process while we waited
		return bin, nil
	}
	toolsDir, err := ToolsDir()
	if err != nil {
		return "", err
	}
	if err := build(ctx, out, filepath.Join(toolsDir, t.module), dir, t); err != nil {
		return "", err
	}
	return bin, nil
}

// netpolModule is the tool module of the real node's NetworkPolicy enforcer: upstream's
// controller with a main of ours (tools/kube-network-policies/main.go).
const netpolModule = "kube-network-policies"

// netpolTool is the enforcer's build. Its cache folder is named after the version and a
// hash of the module's own files (main.go is ours), so a change there is rebuilt.
func netpolTool() (tool, error) {
	toolsDir, err := ToolsDir()
	if err != nil {
		return tool{}, err
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(toolsDir, netpolModule, f))
		if err != nil {
			return tool{}, err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	return tool{module: netpolModule, version: KubeNetworkPoliciesVersion + "-" + hex.EncodeToString(h.Sum(nil))[:12],
		pkgs: []string{ServiceModule + "/tools/" + netpolModule}, ldflags: "-s -w"}, nil
}

// EnsureNetworkPolicyEnforcer builds the real node's NetworkPolicy enforcer
// (kube-network-policies) into the cache when it is missing (about a minute from a cold
// Go build cache on 2 CPUs; the same file lock as EnsureBinaries) and returns its path.
func EnsureNetworkPolicyEnforcer(ctx context.Context, out io.Writer) (string, error) {
	t, err := netpolTool()
	if err != nil {
		return "", err
	}
	return ensureTool(ctx, out, t)
}

func haveAll(dir string, pkgs []string) bool {
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(dir, binName(p))); err != nil {
			return false
		}
	}
	return true
}

// build runs one `go build` into a temporary folder and renames it into place, so an
// interrupted build never leaves a half-written binary that a later run would trust.
func build(ctx context.Context, out io.Writer, modDir, dest string, t tool) error {
	tmp := dest + ".partial"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	names := make([]string, len(t.pkgs))
	for i, p := range t.pkgs {
		names[i] = binName(p)
	}
	label := fmt.Sprintf("%s %s", strings.Join(names, ", "), t.version)
	fmt.Fprintf(out, "harness: building %s from the Go module proxy (first time only; a cold build takes minutes)\n", label)

	// One package builds to an explicit file name; several build into the folder.
	o := tmp + string(filepath.Separator)
	if len(t.pkgs) == 1 {
		o = filepath.Join(tmp, names[0])
	}
	args := append([]string{"build", "-v", "-trimpath", "-ldflags", t.ldflags, "-o", o}, t.pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = modDir
	cgo := "CGO_ENABLED=0"
	if t.cgo {
		cgo = "CGO_ENABLED=1"
	}
	cmd.Env = append(os.Environ(), cgo, "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly", "GOWORK=off")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	// `go build -v` names each package as it compiles; report a count every 15 s.
	var mu sync.Mutex
	count, last, tail := 0, "", []string{}
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			count++
			last = sc.Text()
			tail = append(tail, last)
			if len(tail) > 30 {
				tail = tail[1:]
			}
			mu.Unlock()
		}
		close(done)
	}()
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	waitErr := make(chan error, 1)
	go func() { <-done; waitErr <- cmd.Wait() }()
	for {
		select {
		case err := <-waitErr:
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				return fmt.Errorf("building %s: %w\n%s", label, err, strings.Join(tail, "\n"))
			}
			if err := os.RemoveAll(dest); err != nil {
				return err
			}
			if err := os.Rename(tmp, dest); err != nil {
				return err
			}
			fmt.Fprintf(out, "harness: built %s in %s\n", label, time.Since(start).Round(time.Second))
			return nil
		case <-tick.C:
			mu.Lock()
			fmt.Fprintf(out, "harness: still building %s: %d packages compiled, %s elapsed (last: %s)\n",
				label, count, time.Since(start).Round(time.Second), last)
			mu.Unlock()
		}
	}
}

// copyKwokStages copies kwok's default stages out of the module cache, from exactly the
// module version the binary was built from.
func copyKwokStages(ctx context.Context, modDir, dest string) error {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok")
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly", "GOWORK=off")
	outb, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("locating kwok module: %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(outb)), "kustomize", "stage")
	files := map[string]string{
		"node-initialize.yaml":              "node/fast/node-initialize.yaml",
		"node-heartbeat-with-lease.yaml":    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod-ready.yaml":                    "pod/fast/pod-ready.yaml",
		"pod-complete.yaml":                 "pod/fast/pod-complete.yaml",
		"pod-delete.yaml":                   "pod/fast/pod-delete.yaml",
		"pod-container-running-failed.yaml": "pod/chaos/pod-container-running-failed.yaml",
	}
	tmp := dest + ".partial"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	for name, rel := range files {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			return fmt.Errorf("kwok stage %s: %w", rel, err)
		}
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return err
		}
	}
	return os.Rename(tmp, dest)
}

// lockFile takes an exclusive flock, waiting for another holder to finish.
func lockFile(path string) (func(), error) { return LockFile(path, syscall.LOCK_EX) }

// LockFile takes a flock on path (created if missing), how being syscall.LOCK_EX or
// LOCK_SH, waiting for a conflicting holder in any process; the returned function
// releases it.
func LockFile(path string, how int) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
