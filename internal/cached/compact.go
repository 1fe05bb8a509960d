package cached

import (
	"strconv"
	"time"
	"unique"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The pieces the compact cached objects are made of (cached.go). Each stands for a
// field of a view (container.Deployment, Pod, Service, Record) in fewer bytes, and
// gives it back exactly: a Go time.Time is 24 bytes, a UUID held as a string 16 plus a
// 48-byte allocation. Values that thousands of objects share are interned (a
// unique.Handle is 8 bytes); values that are usually one object's own are not, since an
// interned value costs about 250 bytes of the unique package's map on its own.

// stamp is a time to the nanosecond, 8 bytes; 0 is the zero time.
type stamp int64

func stampOf(t time.Time) stamp {
	if t.IsZero() {
		return 0
	}
	return stamp(t.UnixNano())
}

func (s stamp) time() time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(s))
}

// uuidOr is a UUID in its canonical form as its 16 bytes, or any other string as
// itself (nil: "").
type uuidOr struct {
	b     uuid.UUID
	other *string
}

func uuidOf(s string) uuidOr {
	if s == "" {
		return uuidOr{}
	}
	if u, err := uuid.Parse(s); err == nil && u != uuid.Nil && u.String() == s {
		return uuidOr{b: u}
	}
	return uuidOr{other: &s}
}

func (u uuidOr) String() string {
	switch {
	case u.other != nil:
		return *u.other
	case u.b == uuid.Nil:
		return ""
	}
	return u.b.String()
}

// version is a resourceVersion: an etcd revision as a number (a string would take 16
// bytes and an allocation), or, as it is opaque to clients, any other string as itself.
type version struct {
	n     uint64
	other *string
}

func versionOf(s string) version {
	if n, err := strconv.ParseUint(s, 10, 64); err == nil && strconv.FormatUint(n, 10) == s {
		return version{n: n}
	}
	return version{other: &s}
}

func (v version) String() string {
	if v.other != nil {
		return *v.other
	}
	return strconv.FormatUint(v.n, 10)
}

// compactMeta is container.Meta, and what the informers need of an object (the rest
// of metav1.Object reads as unset: readOnlyMeta). The store's caches hold one
// namespace: it is interned.
// A container's objects share one copy of its id (Store.transform).
type compactMeta struct {
	readOnlyMeta
	name, id    string
	namespace   unique.Handle[string]
	incarnation uuidOr
	created     stamp
	deleting    bool
	// byName: the informer keys it by its name alone (KeysByName), so to client-go its
	// namespace reads as empty.
	byName bool
}

func compactMetaOf(m container.Meta) compactMeta {
	return compactMeta{name: m.Name, id: m.ID, namespace: unique.Make(m.Namespace),
		incarnation: uuidOf(m.Incarnation), created: stampOf(m.Created), deleting: m.Deleting}
}

func (c *compactMeta) meta() container.Meta {
	return container.Meta{Name: c.name, Namespace: c.namespace.Value(), Created: c.created.time(),
		Deleting: c.deleting, ID: c.id, Incarnation: c.incarnation.String()}
}

// deploymentConditions are a Deployment's conditions, interned: every available
// Deployment has the same ones (container.DeploymentOf keeps a message only where the
// status reads it).
type deploymentConditions struct {
	available, progressing, replicaFailure container.Condition
}

// podState is a pod's status but its IP, messages and times, interned: most pods of a
// cluster are in one of a few states (Running and Ready; Pending, ContainerCreating...).
// Messages are often one pod's own (a back-off names the pod): they are held apart.
type podState struct {
	phase                    corev1.PodPhase
	reason                   string
	readinessGates           bool
	ready, containersReady   corev1.ConditionStatus
	notScheduled             bool
	notScheduledReason       string
	container                bool
	containerReady           bool
	restarts                 int32
	waiting                  bool
	waitingReason            string
	running                  bool
	terminated, lastExit     bool
	terminatedReason         string
	lastExitReason           string
	terminatedCode, lastCode int32
}

// podMessages are the messages of a pod's state, in this order.
const (
	podMessage = iota
	notScheduledMessage
	waitingMessage
	terminatedMessage
	lastExitMessage
	podMessages
)

func podStateOf(p *container.Pod) (podState, [podMessages]string) {
	st := podState{phase: p.Phase, reason: p.Reason, readinessGates: p.ReadinessGates, ready: p.Ready, containersReady: p.ContainersReady}
	var msg [podMessages]string
	msg[podMessage] = p.Message
	if r := p.NotScheduled; r != nil {
		st.notScheduled, st.notScheduledReason, msg[notScheduledMessage] = true, r.Reason, r.Message
	}
	if c := p.Container; c != nil {
		st.container, st.containerReady, st.restarts, st.running = true, c.Ready, c.Restarts, c.Running
		if w := c.Waiting; w != nil {
			st.waiting, st.waitingReason, msg[waitingMessage] = true, w.Reason, w.Message
		}
		if t := c.Terminated; t != nil {
			st.terminated, st.terminatedReason, st.terminatedCode, msg[terminatedMessage] = true, t.Reason, t.Code, t.Message
		}
		if t := c.LastExit; t != nil {
			st.lastExit, st.lastExitReason, st.lastCode, msg[lastExitMessage] = true, t.Reason, t.Code, t.Message
		}
	}
	return st, msg
}

// fill sets p's status from st and its messages.
func (st *podState) fill(p *container.Pod, msg []string) {
	p.Phase, p.Reason, p.Message = st.phase, st.reason, msg[podMessage]
	p.ReadinessGates, p.Ready, p.ContainersReady = st.readinessGates, st.ready, st.containersReady
	if st.notScheduled {
		p.NotScheduled = &container.Reason{Reason: st.notScheduledReason, Message: msg[notScheduledMessage]}
	}
	if !st.container {
		return
	}
	c := &container.ContainerStatus{Ready: st.containerReady, Restarts: st.restarts, Running: st.running}
	if st.waiting {
		c.Waiting = &container.Reason{Reason: st.waitingReason, Message: msg[waitingMessage]}
	}
	if st.terminated {
		c.Terminated = &container.Exit{Reason: st.terminatedReason, Message: msg[terminatedMessage], Code: st.terminatedCode}
	}
	if st.lastExit {
		c.LastExit = &container.Exit{Reason: st.lastExitReason, Message: msg[lastExitMessage], Code: st.lastCode}
	}
	p.Container = c
}
