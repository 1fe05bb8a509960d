package container

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// FuzzStatusOf builds a Deployment and its pods from fuzzed choices (shape: one byte per
// choice, see statusShape.walk) and two fuzzed texts that the objects' reasons and
// messages pick from, and reads them as the caches do (DeploymentOf, PodOf). StatusOf
// never panics, answers one of the five statuses with a
// non-empty message made of the objects' own texts plus a short fixed part, does not
// depend on the order the pods come in, and agrees with ToAPI. The seed corpus is
// testdata/fuzz/FuzzStatusOf (the rows of TestStatusOf).
func FuzzStatusOf(f *testing.F) {
	running := podShape{Phase: phaseIdx(corev1.PodRunning), Containers: []csShape{{Ready: 1, State: stateRunning}}}
	crash := podShape{Phase: phaseIdx(corev1.PodRunning), Containers: []csShape{{State: stateWaiting,
		WaitReason: textIdx("CrashLoopBackOff"), WaitMessage: textMessage, Restarts: 5, Last: 1, LastReason: textIdx("Error"), LastExit: 1}}}
	unschedulable := podShape{Phase: phaseIdx(corev1.PodPending), Conds: []condShape{{Type: podCondIdx(corev1.PodScheduled),
		Status: statusIdx(corev1.ConditionFalse), Reason: textIdx("Unschedulable"), Message: textMessage}}}
	live := depShape{State: depLive}
	for _, s := range []struct {
		shape           statusShape
		reason, message string
	}{
		{statusShape{Dep: live, Pods: []podShape{running}}, "", ""},
		{statusShape{Dep: live, Pods: []podShape{crash}}, "", "back-off 2m40s restarting failed container=web"},
		{statusShape{Dep: live, Pods: []podShape{unschedulable}}, "", "0/1 nodes are available: 1 Insufficient cpu."},
		{statusShape{Dep: depShape{State: depLive, Replicas: replicasZero}, Pods: []podShape{{Phase: phaseIdx(corev1.PodRunning), Deleting: 1}}}, "", ""},
		{statusShape{Dep: depShape{State: depLive, Conds: []condShape{{Type: depCondIdx(appsv1.DeploymentReplicaFailure),
			Status: statusIdx(corev1.ConditionTrue), Reason: textIdx("FailedCreate"), Message: textMessage}}}}, "", `pods "web-1" is forbidden: exceeded quota: q`},
		{statusShape{Dep: depShape{State: depDeleting}, Pods: []podShape{running}}, "", ""},
		{statusShape{Dep: depShape{State: depLive, Conds: []condShape{{Type: depCondIdx(appsv1.DeploymentProgressing),
			Status: statusIdx(corev1.ConditionFalse), Reason: textIdx("ProgressDeadlineExceeded"), Message: textMessage}}},
			Pods: []podShape{crash}}, "", "back-off 2m40s restarting failed container=web"},
		{statusShape{Dep: live, Pods: []podShape{{Phase: phaseIdx(corev1.PodFailed), Reason: textReason, Message: textMessage}}},
			"Evicted", "The node was low on resource: memory."},
		// The longest of the provider's own words: a pull back-off with restarts and a last
		// exit, past the progress deadline.
		{statusShape{Dep: depShape{State: depLive, Conds: []condShape{{Type: depCondIdx(appsv1.DeploymentProgressing),
			Status: statusIdx(corev1.ConditionFalse), Reason: textIdx("ProgressDeadlineExceeded")}}},
			Pods: []podShape{{Phase: phaseIdx(corev1.PodRunning), Containers: []csShape{{State: stateWaiting,
				WaitReason: textIdx("ImagePullBackOff"), Restarts: math.MaxInt32, Last: 1, LastExit: math.MinInt32}}}}}, "", ""},
	} {
		f.Add(s.shape.bytes(), s.reason, s.message)
	}

	f.Fuzz(func(t *testing.T, shape []byte, reason, message string) {
		s := readShape(shape)
		texts := statusTexts(reason, message)
		dep, pods := s.build(texts)
		view, podViews := viewsOf(dep, pods)
		st := StatusOf(view, podViews)
		if !slices.Contains([]v1alpha1.ContainerStatus{v1alpha1.PENDING, v1alpha1.RUNNING, v1alpha1.FAILED, v1alpha1.UNKNOWN, v1alpha1.DELETED}, st.Status) {
			t.Fatalf("status %q is not one of the API's", st.Status)
		}
		if st.Message == "" {
			t.Fatalf("%s with an empty message for %s", st.Status, describe(dep, pods))
		}
		// The message is made of at most three of the objects' texts (reason, message, last
		// exit reason) and the provider's own words, of which a failed pull's are the longest.
		if limit := 3*longestText(texts) + maxOwnWords; len(st.Message) > limit {
			t.Fatalf("message of %d bytes, over %d: %q for %s", len(st.Message), limit, st.Message, describe(dep, pods))
		}
		if deleted := dep == nil || dep.DeletionTimestamp != nil; deleted != (st.Status == v1alpha1.DELETED) {
			t.Errorf("status %s for a deployment deleted=%v: %s", st.Status, deleted, describe(dep, pods))
		}
		if dep != nil && dep.DeletionTimestamp == nil && dep.Spec.Replicas != nil && *dep.Spec.Replicas == 0 && st.Status != v1alpha1.FAILED {
			t.Errorf("status %s for a deployment scaled to zero: %s", st.Status, describe(dep, pods))
		}
		if again := StatusOf(view, reversed(podViews)); again != st {
			t.Errorf("status depends on the pods' order: %+v, reversed %+v: %s", st, again, describe(dep, pods))
		}
		if dep != nil {
			// ToAPI answers the same (status_message absent when the message is empty).
			got := ToAPI(Observed{Deployment: view, Pods: podViews})
			msg := ""
			if got.StatusMessage != nil {
				msg = *got.StatusMessage
			}
			if got.Status == nil || *got.Status != st.Status || msg != st.Message || (got.StatusMessage != nil && msg == "") {
				t.Errorf("ToAPI status %v message %q, StatusOf %+v", got.Status, msg, st)
			}
		}
	})
}

// viewsOf reads the objects as the caches do (a nil pod stays nil).
func viewsOf(dep *appsv1.Deployment, pods []*corev1.Pod) (*Deployment, []*Pod) {
	var d *Deployment
	if dep != nil {
		d = ptrTo(DeploymentOf(dep))
	}
	var views []*Pod
	for _, p := range pods {
		var v *Pod
		if p != nil {
			v = ptrTo(PodOf(p))
		}
		views = append(views, v)
	}
	return d, views
}

// describe shows what StatusOf reads of the objects, for a failure report.
func describe(dep *appsv1.Deployment, pods []*corev1.Pod) string {
	type podView struct {
		Name     string
		Deleting bool
		Gates    int
		Status   corev1.PodStatus
	}
	var view struct {
		Deployment *struct {
			Deleting   bool
			Replicas   *int32
			Conditions []appsv1.DeploymentCondition
		} `json:",omitempty"`
		Pods []*podView
	}
	if dep != nil {
		view.Deployment = &struct {
			Deleting   bool
			Replicas   *int32
			Conditions []appsv1.DeploymentCondition
		}{dep.DeletionTimestamp != nil, dep.Spec.Replicas, dep.Status.Conditions}
	}
	for _, p := range pods {
		if p == nil {
			view.Pods = append(view.Pods, nil)
			continue
		}
		view.Pods = append(view.Pods, &podView{p.Name, p.DeletionTimestamp != nil, len(p.Spec.ReadinessGates), p.Status})
	}
	b, _ := json.Marshal(view)
	return string(b)
}

// The choices a shape byte selects from (modulo the table's length).
var (
	fuzzPhases  = []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodFailed, corev1.PodSucceeded, corev1.PodUnknown, "", "Bogus"}
	fuzzStatus  = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown, ""}
	fuzzDepCond = []appsv1.DeploymentConditionType{appsv1.DeploymentAvailable, appsv1.DeploymentProgressing,
		appsv1.DeploymentReplicaFailure, "Other"}
	fuzzPodCond = []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled,
		corev1.PodInitialized, "Other"}
	// fuzzWords are the texts a reason or message picks besides the two fuzzed ones.
	fuzzWords = []string{"", "ContainerCreating", "CrashLoopBackOff", "ImagePullBackOff", "Error", "OOMKilled",
		"Evicted", "NodeLost", "Unschedulable", "FailedCreate", "MinimumReplicasUnavailable", "ProgressDeadlineExceeded", " "}
)

// Text choices 0 and 1 are the fuzzed reason and message; then fuzzWords.
const (
	textReason uint8 = iota
	textMessage
)

// maxOwnWords bounds the part of a status message that is the provider's words, not the
// objects' texts.
const maxOwnWords = 512

func longestText(texts []string) int {
	n := 0
	for _, t := range texts {
		n = max(n, len(t))
	}
	return n
}

func statusTexts(reason, message string) []string {
	return append([]string{reason, message}, fuzzWords...)
}

func textIdx(w string) uint8           { return uint8(2 + slices.Index(fuzzWords, w)) }
func phaseIdx(p corev1.PodPhase) uint8 { return uint8(slices.Index(fuzzPhases, p)) }
func statusIdx(s corev1.ConditionStatus) uint8 {
	return uint8(slices.Index(fuzzStatus, s))
}
func depCondIdx(c appsv1.DeploymentConditionType) uint8 { return uint8(slices.Index(fuzzDepCond, c)) }
func podCondIdx(c corev1.PodConditionType) uint8        { return uint8(slices.Index(fuzzPodCond, c)) }

// Deployment states and replica choices.
const (
	depLive uint8 = iota
	depNil
	depDeleting
	depStates
)

const (
	replicasOne uint8 = iota
	replicasNil
	replicasZero
	replicasAny // ReplicasN
	replicaChoices
)

// Container states.
const (
	stateNone uint8 = iota
	stateWaiting
	stateRunning
	stateTerminated
	stateAll // all three set at once: never from a kubelet, but StatusOf must cope
	stateChoices
)

// statusShape is the fuzzed input of FuzzStatusOf, decoded from (and encoded to) bytes
// by walk: a Deployment and up to four pods (a pod slot may be nil).
type statusShape struct {
	Dep  depShape
	Pods []podShape
}

type depShape struct {
	State, Replicas uint8
	ReplicasN       int32
	Conds           []condShape
}

type condShape struct{ Type, Status, Reason, Message uint8 }

type podShape struct {
	Nil, Age, Deleting, Phase, Reason, Message, Gates, IP uint8
	Conds                                                 []condShape
	Containers                                            []csShape
}

type csShape struct {
	Ready, State, WaitReason, WaitMessage, TermReason, TermMessage, Last, LastReason uint8
	Restarts, ExitCode, LastExit                                                     int32
}

// codec reads a shape from bytes or writes one to bytes, so that one walk defines the
// layout both ways.
type codec interface {
	u8(p *uint8)
	i32(p *int32)
	count(n, max int) int
}

type shapeReader struct{ b []byte }

func (r *shapeReader) next() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}
func (r *shapeReader) u8(p *uint8) { *p = r.next() }
func (r *shapeReader) i32(p *int32) {
	*p = int32(uint32(r.next())<<24 | uint32(r.next())<<16 | uint32(r.next())<<8 | uint32(r.next()))
}
func (r *shapeReader) count(_, max int) int { return int(r.next()) % (max + 1) }

type shapeWriter struct{ b []byte }

func (w *shapeWriter) u8(p *uint8) { w.b = append(w.b, *p) }
func (w *shapeWriter) i32(p *int32) {
	w.b = append(w.b, byte(uint32(*p)>>24), byte(uint32(*p)>>16), byte(uint32(*p)>>8), byte(uint32(*p)))
}
func (w *shapeWriter) count(n, _ int) int { w.b = append(w.b, byte(n)); return n }

func readShape(b []byte) statusShape {
	var s statusShape
	s.walk(&shapeReader{b: b})
	return s
}

func (s statusShape) bytes() []byte {
	w := &shapeWriter{}
	s.walk(w)
	return w.b
}

// resize makes s n long (a reader's fresh slice; a writer's is already n long).
func resize[T any](s []T, n int) []T {
	if len(s) == n {
		return s
	}
	return make([]T, n)
}

func (s *statusShape) walk(c codec) {
	c.u8(&s.Dep.State)
	c.u8(&s.Dep.Replicas)
	c.i32(&s.Dep.ReplicasN)
	s.Dep.Conds = resize(s.Dep.Conds, c.count(len(s.Dep.Conds), 3))
	for i := range s.Dep.Conds {
		s.Dep.Conds[i].walk(c)
	}
	s.Pods = resize(s.Pods, c.count(len(s.Pods), 4))
	for i := range s.Pods {
		p := &s.Pods[i]
		for _, f := range []*uint8{&p.Nil, &p.Age, &p.Deleting, &p.Phase, &p.Reason, &p.Message, &p.Gates, &p.IP} {
			c.u8(f)
		}
		p.Conds = resize(p.Conds, c.count(len(p.Conds), 4))
		for j := range p.Conds {
			p.Conds[j].walk(c)
		}
		p.Containers = resize(p.Containers, c.count(len(p.Containers), 2))
		for j := range p.Containers {
			cs := &p.Containers[j]
			for _, f := range []*uint8{&cs.Ready, &cs.State, &cs.WaitReason, &cs.WaitMessage, &cs.TermReason, &cs.TermMessage, &cs.Last, &cs.LastReason} {
				c.u8(f)
			}
			c.i32(&cs.Restarts)
			c.i32(&cs.ExitCode)
			c.i32(&cs.LastExit)
		}
	}
}

func (k *condShape) walk(c codec) {
	for _, f := range []*uint8{&k.Type, &k.Status, &k.Reason, &k.Message} {
		c.u8(f)
	}
}

func pick[T any](table []T, i uint8) T { return table[int(i)%len(table)] }

// build makes the objects; texts are what reasons and messages pick from.
func (s statusShape) build(texts []string) (*appsv1.Deployment, []*corev1.Pod) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deleted := metav1.NewTime(base.Add(time.Hour))
	var dep *appsv1.Deployment
	if state := s.Dep.State % depStates; state != depNil {
		dep = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web-x1y2z", GenerateName: "web-",
			CreationTimestamp: metav1.NewTime(base), Labels: SystemLabels("web-1")}}
		if state == depDeleting {
			dep.DeletionTimestamp = &deleted
		}
		switch s.Dep.Replicas % replicaChoices {
		case replicasOne:
			dep.Spec.Replicas = ptrTo[int32](1)
		case replicasZero:
			dep.Spec.Replicas = ptrTo[int32](0)
		case replicasAny:
			dep.Spec.Replicas = ptrTo(s.Dep.ReplicasN)
		}
		for _, k := range s.Dep.Conds {
			dep.Status.Conditions = append(dep.Status.Conditions, appsv1.DeploymentCondition{Type: pick(fuzzDepCond, k.Type),
				Status: pick(fuzzStatus, k.Status), Reason: pick(texts, k.Reason), Message: pick(texts, k.Message)})
		}
	}
	var pods []*corev1.Pod
	for i, ps := range s.Pods {
		if ps.Nil%8 == 7 {
			pods = append(pods, nil) // a cache never holds one, but PickPod skips them
			continue
		}
		p := &corev1.Pod{
			// Names are unique, as in one namespace.
			ObjectMeta: metav1.ObjectMeta{Name: "web-x1y2z-" + string(rune('a'+i)),
				CreationTimestamp: metav1.NewTime(base.Add(time.Duration(ps.Age%4) * time.Minute))},
			Status: corev1.PodStatus{Phase: pick(fuzzPhases, ps.Phase), Reason: pick(texts, ps.Reason), Message: pick(texts, ps.Message)},
		}
		if ps.Deleting&1 == 1 {
			p.DeletionTimestamp = &deleted
		}
		if ps.Gates&1 == 1 {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/ready"}}
		}
		if ps.IP&1 == 1 {
			p.Status.PodIP = "10.244.0.4"
		}
		for _, k := range ps.Conds {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: pick(fuzzPodCond, k.Type),
				Status: pick(fuzzStatus, k.Status), Reason: pick(texts, k.Reason), Message: pick(texts, k.Message)})
		}
		for _, c := range ps.Containers {
			cs := corev1.ContainerStatus{Name: "web", Ready: c.Ready&1 == 1, RestartCount: c.Restarts}
			state := c.State % stateChoices
			if state == stateWaiting || state == stateAll {
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: pick(texts, c.WaitReason), Message: pick(texts, c.WaitMessage)}
			}
			if state == stateRunning || state == stateAll {
				cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(base.Add(time.Minute))}
			}
			if state == stateTerminated || state == stateAll {
				cs.State.Terminated = &corev1.ContainerStateTerminated{Reason: pick(texts, c.TermReason),
					Message: pick(texts, c.TermMessage), ExitCode: c.ExitCode}
			}
			if c.Last&1 == 1 {
				cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: pick(texts, c.LastReason), ExitCode: c.LastExit}
			}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
		}
		pods = append(pods, p)
	}
	return dep, pods
}
