package store

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// packedMeta implements metav1.Object: the informers key and index cached objects
// through it (namespace/name, labels). Nothing mutates a cached object; the setters
// exist for the interface and do what they say, except for what is not kept.
var _ metav1.Object = (*packedMeta)(nil)

func (p *packedMeta) GetNamespace() string                { return p.namespace }
func (p *packedMeta) SetNamespace(v string)               { p.namespace = v }
func (p *packedMeta) GetName() string                     { return p.name }
func (p *packedMeta) SetName(v string)                    { p.name = v }
func (p *packedMeta) GetGenerateName() string             { return p.generateName }
func (p *packedMeta) SetGenerateName(v string)            { p.generateName = v }
func (p *packedMeta) GetUID() types.UID                   { return p.uid }
func (p *packedMeta) SetUID(v types.UID)                  { p.uid = v }
func (p *packedMeta) GetResourceVersion() string          { return p.resourceVersion }
func (p *packedMeta) SetResourceVersion(v string)         { p.resourceVersion = v }
func (p *packedMeta) GetGeneration() int64                { return 0 }
func (p *packedMeta) SetGeneration(int64)                 {}
func (p *packedMeta) GetSelfLink() string                 { return "" }
func (p *packedMeta) SetSelfLink(string)                  {}
func (p *packedMeta) GetCreationTimestamp() metav1.Time   { return timeOf(p.created) }
func (p *packedMeta) SetCreationTimestamp(v metav1.Time)  { p.created = unixOf(v) }
func (p *packedMeta) GetDeletionTimestamp() *metav1.Time  { return p.deleted }
func (p *packedMeta) SetDeletionTimestamp(v *metav1.Time) { p.deleted = v }
func (p *packedMeta) GetDeletionGracePeriodSeconds() *int64 {
	return nil
}
func (p *packedMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (p *packedMeta) GetLabels() map[string]string                  { return p.labels.unpack() }
func (p *packedMeta) SetLabels(v map[string]string)                 { p.labels = packLabels(v) }
func (p *packedMeta) GetAnnotations() map[string]string             { return nil }
func (p *packedMeta) SetAnnotations(map[string]string)              {}
func (p *packedMeta) GetFinalizers() []string                       { return p.finalizers }
func (p *packedMeta) SetFinalizers(v []string)                      { p.finalizers = v }
func (p *packedMeta) GetOwnerReferences() []metav1.OwnerReference   { return p.owners }
func (p *packedMeta) SetOwnerReferences(v []metav1.OwnerReference)  { p.owners = v }
func (p *packedMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (p *packedMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
