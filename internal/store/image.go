package store

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// PinImage lets a Deployment a create held for its image run the digest pinned: one
// patch, whose uid makes it a precondition. Gone or replaced is success.
func (s *Store) PinImage(ctx context.Context, dep *container.Deployment, pinned string) error {
	annotations := map[string]any{container.AnnotationImagePending: nil}
	if pinned != dep.Container.Image {
		annotations[container.AnnotationImage] = dep.Container.Image
	}
	return s.patchDeployment(ctx, dep, "pinning the image", map[string]any{
		"metadata": map[string]any{"uid": dep.UID, "annotations": annotations},
		"spec": map[string]any{"replicas": 1, "template": map[string]any{"spec": map[string]any{
			"containers": []map[string]any{{"name": dep.Container.Name, "image": pinned}},
		}}},
	})
}

// RefuseImage keeps a held Deployment at zero pods for good, saying why.
func (s *Store) RefuseImage(ctx context.Context, dep *container.Deployment, reason string) error {
	return s.patchDeployment(ctx, dep, "refusing the image", map[string]any{
		"metadata": map[string]any{"uid": dep.UID, "annotations": map[string]any{
			container.AnnotationImagePending: nil,
			container.AnnotationImageRefused: container.Clip(reason, container.MaxImageNote),
		}},
	})
}

func (s *Store) patchDeployment(ctx context.Context, dep *container.Deployment, what string, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = s.client.AppsV1().Deployments(s.namespace).Patch(ctx, dep.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return kubeerr.Classify(what, err)
}
