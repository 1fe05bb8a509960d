package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// A bug injected on purpose shows that the checker catches what it claims to (issue
// 16: "a deliberately injected bug is caught"). The service is rebuilt with one source
// file replaced through `go build -overlay`: the source tree is never touched. Each bug
// is a text replacement that must match exactly, so a bug that no longer applies to the
// current code fails loudly instead of silently testing nothing.
type bug struct {
	file, old, new, what string
}

var bugs = map[string]bug{
	"drop-unsent-deleted": {
		what: "a DELETED that cannot be published (NATS down) is dropped and its record released, as if the deleted-report-owed finalizer were not honoured",
		file: "internal/status/reporter.go",
		old: `		if err := r.publish(ctx, id, *st); err != nil {
			keepForce()
			return 0, err
		}`,
		new: `		if err := r.publish(ctx, id, *st); err != nil {
			if p.DeleteRecord != nil { // INJECTED BUG (sp-chaos -inject drop-unsent-deleted)
				_ = r.cl.DeleteRecord(ctx, *p.DeleteRecord)
				return 0, nil
			}
			keepForce()
			return 0, err
		}`,
	},
}

// Bugs lists the injectable bugs, for the command's help.
func Bugs() string {
	var out []string
	for name, b := range bugs {
		out = append(out, name+": "+b.what)
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// buildWithBug builds the service binary with the named bug into dir.
func buildWithBug(ctx context.Context, dir, name string) (string, error) {
	b, ok := bugs[name]
	if !ok {
		return "", fmt.Errorf("no bug %q to inject (known: %s)", name, Bugs())
	}
	src, err := os.ReadFile(b.file)
	if err != nil {
		return "", err
	}
	if strings.Count(string(src), b.old) != 1 {
		return "", fmt.Errorf("bug %q no longer applies: %s changed", name, b.file)
	}
	abs, err := filepath.Abs(b.file)
	if err != nil {
		return "", err
	}
	patched := filepath.Join(dir, "injected-"+filepath.Base(b.file))
	if err := os.WriteFile(patched, []byte(strings.Replace(string(src), b.old, b.new, 1)), 0o644); err != nil {
		return "", err
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {abs: patched}})
	if err != nil {
		return "", err
	}
	ov := filepath.Join(dir, "inject-overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "k8s-container-sp-"+name)
	if out, err := exec.CommandContext(ctx, "go", "build", "-overlay", ov, "-o", bin, "./cmd/k8s-container-sp").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -overlay: %v: %s", err, out)
	}
	return bin, nil
}
