package cached

import (
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The caches hold every container's Deployment, Pods, Service and record, so their
// size is most of the provider's memory. A Kubernetes object is large before it holds
// any data (a corev1.Pod struct alone is 1,240 bytes, each label map a few hundred),
// and even the service's views of them (container.Deployment, Pod, Service and Record:
// only what the service reads) are a few hundred bytes of headers, times and pointers.
// So the table (table.go) keeps compact parts of its own (below, made of the pieces in
// compact.go and packed.go), which give the views back exactly (view), by value in one
// entry per container: the container's id and namespace are held once, not in each
// part. Readers get views (Table.Snapshot), never Kubernetes objects. The store's
// BenchmarkCacheBytesPerContainer measures the result, and TestCompactGivesTheViewBack
// that nothing is lost.

type cachedDeployment struct {
	compactMeta
	uid             uuidOr
	resourceVersion version
	// genLen: GenerateName is the name's first genLen bytes (a generated name starts
	// with it); when it is not, generateName is it.
	genLen                int32
	replicas              int32
	hasReplicas, deleting bool
	generateName          unique.Handle[string]
	userLabels            container.Labels
	// spec packs the container and its resources (packContainer).
	spec       string
	conditions unique.Handle[deploymentConditions]
	changed    stamp
}

func newCachedDeployment(d container.Deployment, rv string) *cachedDeployment {
	c := &cachedDeployment{compactMeta: compactMetaOf(d.Meta), uid: uuidOf(string(d.UID)), resourceVersion: versionOf(rv), userLabels: d.UserLabels,
		spec:       packContainer(d.Container, d.Resources),
		conditions: unique.Make(deploymentConditions{d.Available, d.Progressing, d.ReplicaFailure}),
		changed:    stampOf(d.Changed), deleting: d.Deleting}
	if strings.HasPrefix(d.Name, d.GenerateName) {
		c.genLen = int32(len(d.GenerateName))
	} else {
		c.genLen, c.generateName = -1, unique.Make(d.GenerateName)
	}
	if d.Replicas != nil {
		c.replicas, c.hasReplicas = *d.Replicas, true
	}
	return c
}

func (c *cachedDeployment) view(ns, id string) container.Deployment {
	d := container.Deployment{Meta: c.meta(ns, id, c.deleting), UID: types.UID(c.uid.String()), UserLabels: c.userLabels, Changed: c.changed.time()}
	if c.genLen >= 0 {
		d.GenerateName = c.name[:c.genLen]
	} else {
		d.GenerateName = c.generateName.Value()
	}
	if c.hasReplicas {
		r := c.replicas
		d.Replicas = &r
	}
	d.Container, d.Resources = unpackContainer(c.spec)
	conds := c.conditions.Value()
	d.Available, d.Progressing, d.ReplicaFailure = conds.available, conds.progressing, conds.replicaFailure
	return d
}

type cachedPod struct {
	compactMeta
	resourceVersion version
	state           unique.Handle[podState]
	// messages packs its IP and the state's messages (packStrings; "" when it has
	// none).
	messages string
	changed  stamp
}

func newCachedPod(p container.Pod, rv string) *cachedPod {
	st, msg := podStateOf(&p)
	return &cachedPod{compactMeta: compactMetaOf(p.Meta), resourceVersion: versionOf(rv), state: unique.Make(st),
		messages: packStrings(msg[:]), changed: stampOf(p.Changed)}
}

func (c *cachedPod) view(ns, id string) container.Pod {
	st := c.state.Value()
	p := container.Pod{Meta: c.meta(ns, id, st.deleting), Changed: c.changed.time()}
	st.fill(&p, unpackStrings(c.messages, podMessages))
	return p
}

type cachedService struct {
	compactMeta
	resourceVersion version
	uid             uuidOr
	kind            unique.Handle[serviceKind]
	// addresses packs its ports, cluster IP and external address (packService).
	addresses string
}

// serviceKind is what many Services share: their type, and whether they are being
// deleted.
type serviceKind struct {
	serviceType corev1.ServiceType
	deleting    bool
}

func newCachedService(s container.Service, rv string) *cachedService {
	return &cachedService{compactMeta: compactMetaOf(s.Meta), resourceVersion: versionOf(rv), uid: uuidOf(string(s.UID)),
		kind: unique.Make(serviceKind{s.Type, s.Deleting}), addresses: packService(s.Ports, s.ClusterIP, s.ExternalIP)}
}

func (c *cachedService) view(ns, id string) container.Service {
	k := c.kind.Value()
	ports, clusterIP, externalIP := unpackService(c.addresses)
	return container.Service{Meta: c.meta(ns, id, k.deleting), UID: types.UID(c.uid.String()), Type: k.serviceType,
		ClusterIP: clusterIP, Ports: ports, ExternalIP: externalIP}
}

// cachedRecord is a ConfigMap the record informer holds: the record, when it is one.
type cachedRecord struct {
	name            string
	uid             uuidOr
	resourceVersion version
	created         stamp
	// isRecord: it is its container's record; else only its name is kept.
	isRecord, owed, terminating bool
}

func newCachedRecord(l *corev1.ConfigMap, id string) *cachedRecord {
	c := &cachedRecord{name: l.Name, resourceVersion: versionOf(l.ResourceVersion)}
	if rec, ok := container.RecordOf(l, id); ok {
		c.isRecord, c.uid = true, uuidOf(string(rec.UID))
		c.owed, c.terminating, c.created = rec.Owed, rec.Terminating, stampOf(rec.Created)
	}
	return c
}

func (c *cachedRecord) record() container.Record {
	if !c.isRecord {
		return container.Record{Name: c.name}
	}
	return container.Record{Name: c.name, UID: types.UID(c.uid.String()),
		Owed: c.owed, Terminating: c.terminating, Created: c.created.time()}
}

// What the table (table.go) needs of each part: its name, resourceVersion and UID (a
// pod's is not kept: the service never writes pods, so none needs telling apart from
// a write of its own).

func (c cachedDeployment) partName() string     { return c.name }
func (c cachedDeployment) partVersion() version { return c.resourceVersion }
func (c cachedPod) partName() string            { return c.name }
func (c cachedPod) partVersion() version        { return c.resourceVersion }
func (c cachedService) partName() string        { return c.name }
func (c cachedService) partVersion() version    { return c.resourceVersion }
func (c cachedRecord) partName() string         { return c.name }
func (c cachedRecord) partVersion() version     { return c.resourceVersion }
