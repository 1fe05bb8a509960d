package container

import (
	"strings"
	"testing"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestImageHeldPinnedRefused(t *testing.T) {
	build := func() Objects {
		objs, err := Build("abc", specJSON(t, validSpec), opts)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	for _, tc := range []struct {
		name        string
		edit        func(Objects)
		replicas    int32
		podImage    string
		ref, digest string
		status      v1alpha1.ContainerStatus
		message     string
	}{
		{"as sent", func(Objects) {}, 1, "quay.io/myapp:v1.2", "quay.io/myapp:v1.2", "", v1alpha1.PENDING, "Waiting for the pod"},
		{"pinned", func(o Objects) { PinImage(o.Deployment, "quay.io/myapp@"+testDigest) }, 1,
			"quay.io/myapp@" + testDigest, "quay.io/myapp:v1.2", testDigest, v1alpha1.PENDING, "Waiting for the pod"},
		{"held", func(o Objects) { HoldImage(o.Deployment, "quay.io/myapp:v1.2: timeout", false) }, 0,
			"quay.io/myapp:v1.2", "quay.io/myapp:v1.2", "", v1alpha1.PENDING, "The image is not resolved yet: quay.io/myapp:v1.2: timeout"},
		{"held, then pinned", func(o Objects) {
			HoldImage(o.Deployment, "timeout", false)
			PinImage(o.Deployment, "quay.io/myapp@"+testDigest)
		}, 1, "quay.io/myapp@" + testDigest, "quay.io/myapp:v1.2", testDigest, v1alpha1.PENDING, "Waiting for the pod"},
		{"refused", func(o Objects) {
			HoldImage(o.Deployment, "timeout", false)
			HoldImage(o.Deployment, strings.Repeat("x", 2*MaxImageNote), true)
		}, 0, "quay.io/myapp:v1.2", "quay.io/myapp:v1.2", "", v1alpha1.PENDING, "The image is refused: xxx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := build()
			tc.edit(objs)
			d := objs.Deployment
			if *d.Spec.Replicas != tc.replicas || d.Spec.Template.Spec.Containers[0].Image != tc.podImage {
				t.Errorf("replicas %d, pod image %s", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
			}
			if n := len(d.Annotations[AnnotationImageRefused]); n > MaxImageNote {
				t.Errorf("a refusal of %d bytes kept", n)
			}
			view := DeploymentOf(d)
			got := ToAPI(Observed{Deployment: &view})
			digest := ""
			if got.Spec.Image.Digest != nil {
				digest = *got.Spec.Image.Digest
			}
			if got.Spec.Image.Reference != tc.ref || digest != tc.digest {
				t.Errorf("GET image %s, digest %q", got.Spec.Image.Reference, digest)
			}
			if st := StatusOf(&view, nil); st.Status != tc.status || !strings.HasPrefix(st.Message, tc.message) {
				t.Errorf("status %s %q", st.Status, st.Message)
			}
		})
	}
}
