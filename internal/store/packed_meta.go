package store

import (
	"slices"
	"strings"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// packedMeta is the part of an object's ObjectMeta that readers use, and the
// resourceVersion, which the informers use: an update whose resourceVersion equals the
// cached one is taken for a resync and reaches only handlers due one (so without it,
// after the first resync check, updates would stop reaching the status reporter), in as few bytes as
// the informer caches can hold it (see packed.go for why). It implements metav1.Object,
// so informers key, index and hand it out like any object; readers get a real
// Kubernetes object back from unpack.
type packedMeta struct {
	name, generateName, namespace string
	uid                           types.UID
	resourceVersion               string
	created                       int64 // Unix seconds (the API's precision); 0 when unset
	deleted                       *metav1.Time
	labels                        packedLabels
	finalizers                    []string
	owners                        []metav1.OwnerReference
}

func packMeta(m *metav1.ObjectMeta) packedMeta {
	p := packedMeta{
		name: m.Name, generateName: intern(m.GenerateName), namespace: intern(m.Namespace), uid: m.UID,
		resourceVersion: m.ResourceVersion, created: unixOf(m.CreationTimestamp),
		deleted: m.DeletionTimestamp, labels: packLabels(m.Labels), owners: m.OwnerReferences,
	}
	for _, f := range m.Finalizers {
		p.finalizers = append(p.finalizers, intern(f))
	}
	return p
}

func (p *packedMeta) unpackMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: p.name, GenerateName: p.generateName, Namespace: p.namespace, UID: p.uid,
		ResourceVersion: p.resourceVersion, CreationTimestamp: timeOf(p.created),
		DeletionTimestamp: p.deleted, Labels: p.labels.unpack(), Finalizers: slices.Clone(p.finalizers),
		OwnerReferences: slices.Clone(p.owners),
	}
}

// InstanceID is the object's DCM id without building its label map.
func (p *packedMeta) InstanceID() string { return p.labels.id }

func unixOf(t metav1.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func timeOf(sec int64) metav1.Time {
	if sec == 0 {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(sec, 0))
}

// packedLabels holds an object's labels in a few words. Most of them are the same on
// thousands of objects (managed-by, service type, record marker, the user's labels), so
// they are interned together as one string; the ones that differ per container (instance
// id, incarnation, pod-template-hash) are fields.
type packedLabels struct {
	shared                   unique.Handle[string] // "k=v\x00k=v…" sorted; zero: no map (nil)
	id, incarnation, podHash string
}

// Label keys and values never contain '=' or NUL (the apiserver validates them), so
// "k=v" joined by NUL is a faithful encoding.
const labelSep = "\x00"

// labelPodTemplateHash is what the Deployment controller puts on every pod.
const labelPodTemplateHash = "pod-template-hash"

func packLabels(m map[string]string) packedLabels {
	if m == nil {
		return packedLabels{}
	}
	var p packedLabels
	var shared []string
	for k, v := range m {
		// An empty value stays with the shared ones, so unpack can tell it was set.
		switch {
		case k == container.LabelInstanceID && v != "":
			p.id = v
		case k == container.LabelIncarnation && v != "":
			p.incarnation = v
		case k == labelPodTemplateHash && v != "":
			p.podHash = v
		default:
			shared = append(shared, k+"="+v)
		}
	}
	slices.Sort(shared)
	p.shared = unique.Make(strings.Join(shared, labelSep))
	return p
}

func (p packedLabels) unpack() map[string]string {
	if p.shared == (unique.Handle[string]{}) {
		return nil
	}
	m := make(map[string]string, 8)
	if s := p.shared.Value(); s != "" {
		for kv := range strings.SplitSeq(s, labelSep) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
	}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set(container.LabelInstanceID, p.id)
	set(container.LabelIncarnation, p.incarnation)
	set(labelPodTemplateHash, p.podHash)
	return m
}
