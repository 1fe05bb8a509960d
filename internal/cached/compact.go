package cached

import (
	"encoding/binary"
	"strconv"
	"sync"
	"time"

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

// uuidOr is a UUID in its canonical form as its 16 bytes, or any other string (an
// apiserver's UIDs are random UUIDs; tests use others) as an index into others, marked
// by a version nibble of 0xf that no UUID of the apiserver's has (a canonical UUID
// with it is kept in others too). The zero value is "".
type uuidOr uuid.UUID

func uuidOf(s string) uuidOr {
	if s == "" {
		return uuidOr{}
	}
	if u, err := uuid.Parse(s); err == nil && u != uuid.Nil && u[6]>>4 != 0xf && u.String() == s {
		return uuidOr(u)
	}
	var u uuidOr
	binary.BigEndian.PutUint64(u[8:], uint64(others.index(s)))
	u[6] = 0xf0
	return u
}

func (u uuidOr) String() string {
	switch {
	case u == uuidOr{}:
		return ""
	case u[6]>>4 == 0xf:
		return others.at(int(binary.BigEndian.Uint64(u[8:])))
	}
	return uuid.UUID(u).String()
}

// version is a resourceVersion: an etcd revision as a number (a string would take 16
// bytes and an allocation), or, as it is opaque to clients, any other string as an
// index into others with the top bit set.
type version uint64

const otherVersion = 1 << 63

func versionOf(s string) version {
	if n, err := strconv.ParseUint(s, 10, 64); err == nil && n < otherVersion && strconv.FormatUint(n, 10) == s {
		return version(n)
	}
	return version(otherVersion | uint64(others.index(s)))
}

func (v version) String() string {
	if v&otherVersion != 0 {
		return others.at(int(v &^ otherVersion))
	}
	return strconv.FormatUint(uint64(v), 10)
}

// number is the version as a revision; false when it is another string.
func (v version) number() (uint64, bool) { return uint64(v), v&otherVersion == 0 }

// others holds, once each, the UIDs and resourceVersions that are not what an
// apiserver sends (uuidOr, version), so the cached parts keep a fixed size. It only
// grows: a real cluster adds nothing to it.
var others interned

type interned struct {
	mu      sync.Mutex
	all     []string
	byValue map[string]int
}

func (o *interned) index(s string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i, ok := o.byValue[s]; ok {
		return i
	}
	if o.byValue == nil {
		o.byValue = map[string]int{}
	}
	o.all = append(o.all, s)
	o.byValue[s] = len(o.all) - 1
	return len(o.all) - 1
}

func (o *interned) at(i int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i < 0 || i >= len(o.all) {
		return ""
	}
	return o.all[i]
}

// compactMeta is container.Meta but for the namespace (the table's), the id (its
// entry's) and Deleting (each part keeps it where it costs no bytes: beside other
// small fields, or in a value it interns).
type compactMeta struct {
	name        string
	incarnation uuidOr
	created     stamp
}

func compactMetaOf(m container.Meta) compactMeta {
	return compactMeta{name: m.Name, incarnation: uuidOf(m.Incarnation), created: stampOf(m.Created)}
}

func (c *compactMeta) meta(ns, id string, deleting bool) container.Meta {
	return container.Meta{Name: c.name, Namespace: ns, Created: c.created.time(),
		Deleting: deleting, ID: id, Incarnation: c.incarnation.String()}
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
	deleting                 bool
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

// podMessages are the IP and the messages of a pod's state, in this order.
const (
	podIP = iota
	podMessage
	notScheduledMessage
	waitingMessage
	terminatedMessage
	lastExitMessage
	podMessages
)

func podStateOf(p *container.Pod) (podState, [podMessages]string) {
	st := podState{deleting: p.Deleting, phase: p.Phase, reason: p.Reason, readinessGates: p.ReadinessGates, ready: p.Ready, containersReady: p.ContainersReady}
	var msg [podMessages]string
	msg[podIP], msg[podMessage] = p.IP, p.Message
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
	p.Deleting, p.IP = st.deleting, msg[podIP]
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
