package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/imageregistry"
)

// ResolveResult compares POSTs through a service that resolves each image through a
// local registry with POSTs through one that does not, interleaved.
type ResolveResult struct {
	Plain    Dist `json:"post"`
	Resolved Dist `json:"post_resolved"`
	// RegistryRequests: manifest requests the registry served during the POSTs (one
	// HEAD per POST, and one GET per digest first checked).
	RegistryRequests int `json:"registry_manifest_requests"`
}

// Resolution runs n POSTs through each of two services of their own namespaces, one
// with SP_IMAGE_RESOLVE through an in-process registry (package imageregistry, the real
// node's) holding the bench's image, one without; the namespaces go afterwards.
func (e *Env) Resolution(ctx context.Context, n int) (res ResolveResult, err error) {
	var manifests atomic.Int64
	reg, err := imageregistry.StartLocal(filepath.Join(e.Dir, "resolve-registry"), func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Has("ns") && strings.Contains(r.URL.Path, "/manifests/") {
				manifests.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	if err != nil {
		return res, err
	}
	defer reg.Close()
	if _, err := reg.PushRandom(ctx, benchImage); err != nil {
		return res, err
	}
	self := reg.Addr
	services := map[string]*Service{}
	for ns, env := range map[string][]string{
		"bench-plain":   nil,
		"bench-resolve": {"SP_IMAGE_RESOLVE=true", "SP_IMAGE_MIRRORS=*=http://" + self},
	} {
		if err := harness.EnsureNamespace(ctx, e.Admin, ns); err != nil {
			return res, err
		}
		s, err := e.StartService(ctx, ns, env...)
		if err != nil {
			return res, err
		}
		defer s.Stop()
		services[ns] = s
	}
	defer func() {
		for ns := range services {
			_ = e.Admin.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{})
		}
	}()
	var plain, resolved []time.Duration
	for i := range n {
		d, err := services["bench-plain"].post(fmt.Sprintf("plain-%04d", i))
		if err != nil {
			return res, err
		}
		plain = append(plain, d)
		if d, err = services["bench-resolve"].post(fmt.Sprintf("resolved-%04d", i)); err != nil {
			return res, err
		}
		resolved = append(resolved, d)
	}
	_, body, err := services["bench-resolve"].get("/api/v1alpha1/containers/resolved-0000")
	if err != nil {
		return res, err
	}
	if !strings.Contains(string(body), `"digest":"sha256:`) {
		return res, fmt.Errorf("the resolving service did not pin the image: %s", body)
	}
	return ResolveResult{Plain: summarize(plain), Resolved: summarize(resolved), RegistryRequests: int(manifests.Load())}, nil
}

// benchImage is the image every bench POST names (specJSON).
const benchImage = "quay.io/example/app:v1"
