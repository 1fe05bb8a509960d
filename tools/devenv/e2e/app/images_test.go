package app_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/imageregistry"
)

// retag pushes the image the real node's registry holds as from under the name to, each
// edit applied first, as a tenant pushing to its own repository would; it returns the
// pushed digest.
func retag(t *testing.T, registry, from, to string, edit ...func(v1.Image) (v1.Image, error)) string {
	t.Helper()
	src, err := imageregistry.LocalName(from, registry)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edit {
		if img, err = e(img); err != nil {
			t.Fatal(err)
		}
	}
	d, err := imageregistry.PushImage(t.Context(), img, to, registry)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// foreignURL adds a layer that names a URL of its own, which containerd would fetch
// from the node's network before it asks the registry.
func foreignURL(img v1.Image) (v1.Image, error) {
	l, err := random.Layer(256, types.DockerLayer)
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{Layer: l, URLs: []string{"http://127.0.0.1:9/probe-blob"}})
}

// Images resolved and pinned on the real node: the pod runs the digest the create
// resolved, whatever the tag names later; a manifest naming foreign URLs is refused; a
// tag nobody pushed yet is a 201 that stays PENDING, then runs once pushed.
func TestRealNodeImagesPinned(t *testing.T) {
	node := testenv.RealNode(t)
	p, events, ns := onRealNode(t, node.ResolveThrough()...)
	moving := "example.invalid/moving:v1"
	first := retag(t, node.Registry, harness.TestImage("web"), moving)

	create(t, p, "pinned", spec("pinned", moving, small))
	events.waitStatus("pinned", "RUNNING", "Container is running.", 90*time.Second)
	r := do(t, http.MethodGet, p.URL+containers+"/pinned", nil)
	img := r.JSON["spec"].(map[string]any)["image"].(map[string]any)
	if img["reference"] != moving || img["digest"] != first {
		t.Errorf("GET image %v, want reference %s and digest %s", img, moving, first)
	}
	if got := deploymentOf(t, ns, "pinned").Spec.Template.Spec.Containers[0].Image; got != "example.invalid/moving@"+first {
		t.Errorf("the pod names %s", got)
	}

	// The tag moves to an image that exits at once; the restarted pod still serves.
	retag(t, node.Registry, harness.TestImage("crash"), moving)
	if err := testenv.Cluster(t).Client.CoreV1().Pods(ns).Delete(t.Context(), podOf(t, ns, "pinned").Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 90*time.Second, "a new pod running the first digest", func() error {
		pod := podOf(t, ns, "pinned")
		if cs := pod.Status.ContainerStatuses; len(cs) == 0 || cs[0].State.Running == nil || !strings.HasSuffix(cs[0].ImageID, first) {
			return fmt.Errorf("pod %s: %+v", pod.Name, pod.Status.ContainerStatuses)
		}
		return nil
	})

	// Foreign URLs: refused before anything is made.
	retag(t, node.Registry, harness.TestImage("web"), "example.invalid/urls:v1", foreignURL)
	r = do(t, http.MethodPost, p.URL+containers+"?id=urls", spec("urls", "example.invalid/urls:v1", small))
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "foreign-urls") {
		t.Errorf("a manifest with foreign URLs: %d %s", r.Status, r.Body)
	}
	if r := do(t, http.MethodGet, p.URL+containers+"/urls", nil); r.Status != http.StatusNotFound {
		t.Errorf("GET after the refusal: %d %s", r.Status, r.Body)
	}

	// Not pushed yet: 201, PENDING naming the reference, no pod; pushed: it runs.
	later := "example.invalid/later:v1"
	create(t, p, "later", spec("later", later, small))
	events.waitStatus("later", "PENDING", "The image is not resolved yet: "+later, 30*time.Second)
	if n := len(podsOf(t, ns, "later")); n != 0 {
		t.Errorf("%d pods before the image resolved", n)
	}
	retag(t, node.Registry, harness.TestImage("web"), later)
	events.waitStatus("later", "RUNNING", "Container is running.", 180*time.Second)
}

// localRegistry is an OCI registry on 127.0.0.1 (imageregistry.Local) that a test
// service resolves every registry through: kwok runs no image, but the provider
// resolves and pins it as it would for a real node.
type localRegistry struct{ *imageregistry.Local }

// newLocalRegistry starts one; with a user and password, a read (a request with ns=,
// as a mirror gets it) must carry them, as a private registry's would.
func newLocalRegistry(t *testing.T, userPassword ...string) *localRegistry {
	t.Helper()
	var wrap func(http.Handler) http.Handler
	if len(userPassword) == 2 {
		wrap = func(inner http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				if u, pw, ok := req.BasicAuth(); req.URL.Query().Has("ns") && (!ok || u != userPassword[0] || pw != userPassword[1]) {
					w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				inner.ServeHTTP(w, req)
			})
		}
	}
	l, err := imageregistry.StartLocal(t.TempDir(), wrap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &localRegistry{l}
}

// env are the settings of a service resolving through r.
func (r *localRegistry) env() []string {
	return []string{"SP_IMAGE_RESOLVE=true", "SP_IMAGE_MIRRORS=*=http://" + r.Addr}
}

// push puts a small image under ref (as pods name it) and returns its digest.
func (r *localRegistry) push(t *testing.T, ref string) string {
	t.Helper()
	d, err := r.PushRandom(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// SP_IMAGE_PULL_SECRETS: the provider resolves with the secrets the pods pull with, and
// every pod names them.
func TestImagePullSecrets(t *testing.T) {
	ns := testenv.Namespace(t)
	images := newLocalRegistry(t, "tenant-robot", "s3cret")
	digest := images.push(t, "quay.io/private/app:v1")
	auth := base64.StdEncoding.EncodeToString([]byte("tenant-robot:s3cret"))
	_, err := testenv.Cluster(t).Client.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"auth":"` + auth + `"}}}`)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := startProvider(t, ns, withEnv(append(images.env(), "SP_IMAGE_PULL_SECRETS=regcred,missing")...))
	p.waitSynced(t)
	r := do(t, http.MethodPost, p.URL+containers+"?id=private", spec("app", "quay.io/private/app:v1"))
	if r.Status != http.StatusCreated || !strings.Contains(string(r.Body), digest) {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	ps := deploymentOf(t, ns, "private").Spec.Template.Spec
	if len(ps.ImagePullSecrets) != 2 || ps.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("imagePullSecrets %v", ps.ImagePullSecrets)
	}

	// Without the secret the registry refuses the provider too: held, PENDING.
	anon := startProvider(t, testenv.Namespace(t), withEnv(images.env()...))
	anon.waitSynced(t)
	r = do(t, http.MethodPost, anon.URL+containers+"?id=private", spec("app", "quay.io/private/app:v1"))
	if r.Status != http.StatusCreated || strings.Contains(string(r.Body), digest) {
		t.Errorf("create without credentials: %d %s", r.Status, r.Body)
	}
}

// holding pushes refs and returns the settings of a service resolving through r (one
// withEnv takes them all: each withEnv starts again from the test defaults).
func (r *localRegistry) holding(t *testing.T, refs ...string) []string {
	t.Helper()
	for _, ref := range refs {
		r.push(t, ref)
	}
	return r.env()
}
