package container

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func pod(name string, age time.Duration, phase corev1.PodPhase, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withContainer(cs corev1.ContainerStatus) podOpt {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs) }
}

func waitingCS(reason, msg string, restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{RestartCount: restarts, State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

func terminating(p *corev1.Pod) { now := metav1.NewTime(t0); p.DeletionTimestamp = &now }

func deployment(conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	return &appsv1.Deployment{Status: appsv1.DeploymentStatus{Conditions: conds}}
}

func scaled(n int32, d *appsv1.Deployment) *appsv1.Deployment {
	d.Spec.Replicas = &n
	return d
}

func cond(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg}
}

func TestStatusOf(t *testing.T) {
	crash := waitingCS("CrashLoopBackOff", "back-off 2m40s restarting failed container=web", 5)
	crash.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}
	cases := []struct {
		name    string
		dep     *appsv1.Deployment
		pods    []*corev1.Pod
		want    v1alpha1.ContainerStatus
		message string // substring
	}{
		{"running", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodRunning, withContainer(corev1.ContainerStatus{
			Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}))},
			v1alpha1.RUNNING, "Container is running."},
		{"crash loop in phase Running stays RUNNING", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodRunning, withContainer(crash))},
			v1alpha1.RUNNING, "CrashLoopBackOff: back-off 2m40s restarting failed container=web (restarts: 5); last exit: Error, code 1"},
		{"running, not ready, no restarts (readiness probe failing)", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodRunning, withContainer(corev1.ContainerStatus{
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}))},
			v1alpha1.RUNNING, "Container is running but not ready."},
		{"node stopped reporting: the node controller marked the pod not ready", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodRunning,
			withContainer(corev1.ContainerStatus{Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}),
			func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse},
					{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}
			})}, v1alpha1.UNKNOWN, "NodeNotReady"},
		{"running but not ready after restarts", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodRunning, withContainer(corev1.ContainerStatus{
			RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}))},
			v1alpha1.RUNNING, "Container is running but not ready (restarts: 2)."},
		{"image pull backoff", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodPending,
			withContainer(waitingCS("ImagePullBackOff", `Back-off pulling image "x"`, 0)))},
			v1alpha1.PENDING, `ImagePullBackOff: the node could not pull image "x" and tries again with a back-off`},
		{"unschedulable", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodPending, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}
		})}, v1alpha1.PENDING, "Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."},
		{"pending, creating", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodPending,
			withContainer(waitingCS("ContainerCreating", "", 0)))}, v1alpha1.PENDING, "being created"},
		{"oom killed", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodFailed, withContainer(corev1.ContainerStatus{
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}))},
			v1alpha1.FAILED, "OOMKilled (exit code 137)"},
		{"evicted", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodFailed, func(p *corev1.Pod) {
			p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
		})}, v1alpha1.FAILED, "Evicted: The node was low on resource: memory."},
		{"succeeded is a failure for a service", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodSucceeded)}, v1alpha1.FAILED, "exited"},
		{"node lost", deployment(), []*corev1.Pod{pod("a", 0, corev1.PodUnknown, func(p *corev1.Pod) {
			p.Status.Reason, p.Status.Message = "NodeLost", "Node n1 is unresponsive"
		})}, v1alpha1.UNKNOWN, "NodeLost: Node n1 is unresponsive"},
		{"deployment without pods yet", deployment(), nil, v1alpha1.PENDING, "Waiting for the pod"},
		{"deployment unavailable", deployment(cond(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")),
			nil, v1alpha1.PENDING, "MinimumReplicasUnavailable"},
		{"replica failure from quota", deployment(
			cond(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", ""),
			cond(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate", `pods "web-1" is forbidden: exceeded quota: q`)),
			nil, v1alpha1.FAILED, "FailedCreate: the namespace's resource quota does not admit the container's pod (the provider's log has the detail)"},
		{"progress deadline exceeded", deployment(cond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded", "timed out")),
			nil, v1alpha1.FAILED, "ProgressDeadlineExceeded"},
		// Past the progress deadline with a pod that keeps trying: the pod's status, not
		// FAILED (DCM tears a run down on FAILED; the kubelet keeps pulling and restarting,
		// and the container runs once it can); the message says the deadline passed.
		{"past the progress deadline, pod stuck pulling: PENDING", pastDeadlineDep(), []*corev1.Pod{pod("a", 0, corev1.PodPending,
			withContainer(waitingCS("ImagePullBackOff", `Back-off pulling image "x"`, 0)))},
			v1alpha1.PENDING, `ImagePullBackOff: the node could not pull image "x" and tries again with a back-off` + pullWhy + deadlineNote},
		{"past the progress deadline, pull failing: PENDING", pastDeadlineDep(), []*corev1.Pod{pod("a", 0, corev1.PodPending,
			withContainer(waitingCS("ErrImagePull", `failed to pull and unpack image "docker.io/library/x:v1": dial tcp 10.0.0.1:443: connect: connection refused`, 0)))},
			v1alpha1.PENDING, `ErrImagePull: the node could not pull image "docker.io/library/x:v1"` + pullWhy + deadlineNote},
		{"past the progress deadline, crash loop in phase Running: RUNNING", pastDeadlineDep(), []*corev1.Pod{pod("a", 0, corev1.PodRunning, withContainer(crash))},
			v1alpha1.RUNNING, "CrashLoopBackOff: back-off 2m40s restarting failed container=web (restarts: 5); last exit: Error, code 1" + deadlineNote},
		{"past the progress deadline, running but never ready: RUNNING", pastDeadlineDep(), []*corev1.Pod{pod("a", 0, corev1.PodRunning, withContainer(corev1.ContainerStatus{
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}))},
			v1alpha1.RUNNING, "Container is running but not ready" + deadlineNote},
		{"past the progress deadline, pod being created: PENDING", pastDeadlineDep(), []*corev1.Pod{pod("a", 0, corev1.PodPending,
			withContainer(waitingCS("ContainerCreating", "", 0)))}, v1alpha1.PENDING, "Container is being created" + deadlineNote},
		{"past the progress deadline, a ready pod speaks (a rollout stuck beside it): as it is", pastDeadlineDep(), []*corev1.Pod{
			pod("old", time.Hour, corev1.PodRunning, withContainer(corev1.ContainerStatus{Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})),
			pod("new", time.Minute, corev1.PodPending, withContainer(waitingCS("ImagePullBackOff", `Back-off pulling image "x"`, 0)))},
			v1alpha1.RUNNING, "Container is running."},
		{"past the progress deadline, pod failed: FAILED as it is", pastDeadlineDep(), []*corev1.Pod{pod("a", 0, corev1.PodFailed, func(p *corev1.Pod) {
			p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
		})}, v1alpha1.FAILED, "Evicted: The node was low on resource: memory."},
		{"Progressing=False for another reason: no deadline said", deployment(cond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "Other", "")),
			[]*corev1.Pod{pod("a", 0, corev1.PodPending, withContainer(waitingCS("ContainerCreating", "", 0)))}, v1alpha1.PENDING, "Container is being created."},
		{"scaled to zero", scaled(0, deployment()), nil, v1alpha1.FAILED, "scaled to zero"},
		{"scaled to zero, its pod still terminating", scaled(0, deployment()), []*corev1.Pod{pod("a", 0, corev1.PodRunning, terminating)},
			v1alpha1.FAILED, "scaled to zero"},
		{"scaled back up, no pod yet", scaled(1, deployment()), nil, v1alpha1.PENDING, "Waiting for the pod"},
		{"neither", nil, nil, v1alpha1.DELETED, "deleted"},
		{"pods outlive the deployment briefly", nil, []*corev1.Pod{pod("a", 0, corev1.PodRunning, terminating)}, v1alpha1.DELETED, "deleted"},
		{"deployment being deleted (held by the finalizer)", func() *appsv1.Deployment {
			d := deployment()
			now := metav1.NewTime(t0)
			d.DeletionTimestamp = &now
			return d
		}(), []*corev1.Pod{pod("a", 0, corev1.PodRunning)}, v1alpha1.DELETED, "deleted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := StatusOf(viewsOf(tc.dep, tc.pods))
			if got.Status != tc.want || !strings.Contains(got.Message, tc.message) {
				t.Errorf("StatusOf = %s %q, want %s containing %q", got.Status, got.Message, tc.want, tc.message)
			}
		})
	}
}

// pastDeadlineDep is a Deployment past its progress deadline, as the controller says it.
func pastDeadlineDep() *appsv1.Deployment {
	return deployment(
		cond(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
		cond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded", `ReplicaSet "web-7d4b9c" has timed out progressing.`))
}

func TestPickPod(t *testing.T) {
	cases := []struct {
		name string
		pods []*corev1.Pod
		want string
	}{
		{"none", nil, ""},
		{"one", []*corev1.Pod{pod("a", 0, corev1.PodPending)}, "a"},
		{"evicted old does not mask a healthy new one", []*corev1.Pod{
			pod("old", time.Hour, corev1.PodFailed), pod("new", time.Minute, corev1.PodRunning)}, "new"},
		{"running beats a newer pending (rollout)", []*corev1.Pod{
			pod("old", time.Hour, corev1.PodRunning), pod("new", time.Minute, corev1.PodPending)}, "old"},
		{"terminating running loses to a live pending", []*corev1.Pod{
			pod("old", time.Hour, corev1.PodRunning, terminating), pod("new", time.Minute, corev1.PodPending)}, "new"},
		{"newest of several failed", []*corev1.Pod{
			pod("f1", 3*time.Minute, corev1.PodFailed), pod("f3", time.Minute, corev1.PodFailed), pod("f2", 2*time.Minute, corev1.PodFailed)}, "f3"},
		{"same age breaks on name", []*corev1.Pod{pod("b", 0, corev1.PodPending), pod("c", 0, corev1.PodPending), pod("a", 0, corev1.PodPending)}, "c"},
		{"only terminating left", []*corev1.Pod{pod("a", 0, corev1.PodRunning, terminating)}, "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The choice must not depend on the order the cache returns pods in.
			for _, order := range [][]*corev1.Pod{tc.pods, reversed(tc.pods)} {
				got := ""
				_, views := viewsOf(nil, order)
				if p := PickPod(views); p != nil {
					got = p.Name
				}
				if got != tc.want {
					t.Errorf("PickPod = %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func reversed[T any](ps []T) []T {
	out := make([]T, len(ps))
	for i, p := range ps {
		out[len(ps)-1-i] = p
	}
	return out
}
