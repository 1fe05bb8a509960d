package harness_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/imageregistry"
)

// A pod naming a public image nobody pushed stays Pending in ErrImagePull /
// ImagePullBackOff, and the pull went to the node's registry only: the message names it,
// the registry saw (and refused) the pull, and containerd never looked the host up.
func TestRealNodePullsOnlyFromItsRegistry(t *testing.T) {
	n, ns := testenv.RealNodeNamespace(t)
	e := testenv.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const public = "quay.io/example/never-pushed-" + "public:v1"
	if _, err := e.Client.AppsV1().Deployments(ns).Create(ctx, deployment("public", public), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var msg string
	testenv.Eventually(t, 2*time.Minute, "pod Pending in ErrImagePull/ImagePullBackOff", func() error {
		p, err := onePod(ctx, e.Client, ns, "app=public")
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodPending {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		if waiting(p, "ErrImagePull") != nil && waiting(p, "ImagePullBackOff") != nil {
			return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
		}
		msg = p.Status.ContainerStatuses[0].State.Waiting.Message
		if !strings.Contains(msg, n.Registry) {
			return fmt.Errorf("waiting message %q does not name the registry %s (yet)", msg, n.Registry)
		}
		return nil
	})
	t.Logf("waiting message: %s", msg)
	log, err := os.ReadFile(n.ImageRegistryLog())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "(a pull of "+public+") refused") {
		t.Errorf("the registry's log does not show the pull of %s", public)
	}
	// The sandbox image came from the registry too: pods ran before this one.
	if !strings.Contains(string(log), "/v2/registry.k8s.io/pause/manifests/3.10") {
		t.Errorf("the registry's log shows no pull of the sandbox image %s", harness.SandboxImage)
	}
	clog, err := os.ReadFile(n.ContainerdLog())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"lookup quay.io", "quay.io:443", "registry-1.docker.io", "registry.k8s.io:443"} {
		if strings.Contains(string(clog), s) {
			t.Errorf("containerd's log mentions %q: a pull went elsewhere", s)
		}
	}
}

// An image pushed under its real name (a Docker Hub short name, or a name of the node's
// registry itself) runs on the node by that name, whatever the pull policy.
func TestRealNodeRunsImagesPushedUnderTheirRealNames(t *testing.T) {
	n, ns := testenv.RealNodeNamespace(t)
	e := testenv.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// An image tarball as `docker save` writes it: the web test image, read back from the
	// registry.
	web, err := imageregistry.LocalName(harness.TestImage("web"), n.Registry)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(web, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "web.tar")
	tag, _ := name.NewTag("nginx:alpine")
	if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
		t.Fatal(err)
	}
	own := n.Registry + "/team/app:v1"
	for _, ref := range []string{"docker.io/library/nginx:alpine", own} {
		local, err := n.PushImage(ctx, tarPath, ref)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pushed %s as %s", ref, local)
	}

	for app, image := range map[string]string{"nginx": "nginx:alpine", "own": own} {
		d := deployment(app, image)
		d.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways // pulled every time: it can be now
		if _, err := e.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, app := range []string{"nginx", "own"} {
		testenv.Eventually(t, 2*time.Minute, app+" Running", func() error {
			p, err := onePod(ctx, e.Client, ns, "app="+app)
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("phase %s, containers %+v", p.Status.Phase, p.Status.ContainerStatuses)
			}
			return nil
		})
	}
}
