package container

import (
	"slices"

	"k8s.io/apimachinery/pkg/labels"
)

// Labels every object of a container carries; the informers select on the first and last.
const (
	LabelManagedBy   = "dcm.project/managed-by"
	LabelInstanceID  = "dcm.project/dcm-instance-id"
	LabelServiceType = "dcm.project/dcm-service-type"

	ManagedByValue   = "dcm"
	ServiceTypeValue = "container"

	// ReservedLabelPrefix is DCM's: users may not set labels under it.
	ReservedLabelPrefix = "dcm.project/"

	// AnnotationResources keeps spec.resources exactly as sent (cpu as integer or string,
	// memory with its unit) so GET echoes what the client sent.
	AnnotationResources = "dcm.project/requested-resources"
	// AnnotationImage keeps spec.image.reference as sent when the pod names the digest it
	// resolved to, so GET echoes the reference.
	AnnotationImage = "dcm.project/image-reference"
	// AnnotationImagePending says why the image is not resolved yet; the Deployment runs
	// no pod until the status controller resolves it.
	AnnotationImagePending = "dcm.project/image-pending"
	// AnnotationImageRefused says which rule the image broke once resolved; the
	// Deployment never runs a pod.
	AnnotationImageRefused = "dcm.project/image-refused"
)

// Selector is the label selector of everything this provider manages.
const Selector = LabelManagedBy + "=" + ManagedByValue + "," + LabelServiceType + "=" + ServiceTypeValue

// InstanceSelector selects the objects of one container: every lookup by id (deletes,
// the create's checks, the confirmations at the apiserver, tests) uses it, so
// they all agree on what "the container's objects" are. It names the service type:
// DCM's other providers (database, network…) label their objects with the same
// managed-by and instance-id labels, and a DELETE of a container must never select them.
func InstanceSelector(id string) string {
	return labels.SelectorFromSet(SystemLabels(id)).String()
}

// SystemLabels are the three DCM labels of one container.
func SystemLabels(id string) map[string]string {
	return map[string]string{
		LabelManagedBy:   ManagedByValue,
		LabelInstanceID:  id,
		LabelServiceType: ServiceTypeValue,
	}
}

// InstanceID is the DCM id on an object's labels ("" if none).
func InstanceID(labels map[string]string) string { return labels[LabelInstanceID] }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
