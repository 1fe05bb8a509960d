package container

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
)

// MaxImageNote bounds the reason kept in an image annotation: a registry's error text
// is the registry's to choose.
const MaxImageNote = 512

// PinImage makes the Deployment's pod name pinned (repository@sha256:…), keeping the
// reference as sent for GET, and lets it run.
func PinImage(d *appsv1.Deployment, pinned string) {
	ctr := &d.Spec.Template.Spec.Containers[0]
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	if pinned != ctr.Image {
		d.Annotations[AnnotationImage] = ctr.Image
		ctr.Image = pinned
	}
	delete(d.Annotations, AnnotationImagePending)
	d.Spec.Replicas = ptr.To[int32](1)
}

// HoldImage keeps the Deployment at zero pods until its image is resolved: reason says
// why it is not yet (refused false) or why it never will be (refused true).
func HoldImage(d *appsv1.Deployment, reason string, refused bool) {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	key := AnnotationImagePending
	if refused {
		key = AnnotationImageRefused
		delete(d.Annotations, AnnotationImagePending)
	}
	d.Annotations[key] = Clip(reason, MaxImageNote)
	d.Spec.Replicas = ptr.To[int32](0)
}

// imageOf is the reference as sent and the digest the pod runs ("" if not pinned).
func imageOf(image string, annotations map[string]string) (ref, digest string) {
	ref, ok := annotations[AnnotationImage]
	if !ok {
		return image, ""
	}
	if _, d, found := strings.Cut(image, "@"); found {
		digest = d
	}
	return ref, digest
}
