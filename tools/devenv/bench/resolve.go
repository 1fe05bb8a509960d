package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
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
	defer func() {
		for ns, s := range services {
			s.Stop()
			began := time.Now()
			if derr := e.removeNamespace(context.WithoutCancel(ctx), ns); derr != nil {
				fmt.Fprintf(e.Log, "bench: create with image resolution: namespace %s: %v\n", ns, derr)
				continue
			}
			fmt.Fprintf(e.Log, "bench: create with image resolution: namespace %s gone in %.1f s\n", ns, time.Since(began).Seconds())
		}
	}()
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
		services[ns] = s
	}
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

// removeNamespace deletes namespace ns and waits until it is gone. Its records keep the
// service's finalizer, which no stopped service takes off: left there, they hold the
// namespace terminating, and the namespace controller's retries (a LIST and a delete of
// every kind each time) load the apiserver through every later phase.
func (e *Env) removeNamespace(ctx context.Context, ns string) error {
	if err := e.Admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return err
	}
	recs, err := e.Admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: container.RecordSelector})
	if err != nil {
		return err
	}
	if err := parallel(16, 0, len(recs.Items), func(i int) error {
		return e.dropRecordFinalizer(ctx, ns, recs.Items[i].Name, recs.Items[i].UID)
	}); err != nil {
		return err
	}
	return waitUntil(ctx, 2*time.Minute, func() bool {
		_, err := e.Admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// benchImage is the image every bench POST names (specJSON).
const benchImage = "quay.io/example/app:v1"
