package container

import (
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// Status is the DCM status of one container and a human-readable reason. GET and the
// status controller both use it, so what DCM is told and what it reads back agree.
type Status struct {
	Status  v1alpha1.ContainerStatus
	Message string
}

// StatusOf computes a container's status from its Deployment (nil when gone) and its
// Pods, following the design's precedence: the pod first (its phase decides), then the
// Deployment. A container whose Deployment is gone or being deleted is DELETED: its
// pods are only waiting for the garbage collector, and reporting them (RUNNING) after
// DELETED would tell DCM the container came back.
func StatusOf(dep *Deployment, pods []*Pod) Status {
	return finish(statusOf(dep, pods, false))
}

// Withheld is what StatusOf kept out of the container's status message (withhold.go:
// the node's pull error, a quota's usage), for the provider's log; "" when nothing.
func Withheld(dep *Deployment, pods []*Pod) string {
	if raw := finish(statusOf(dep, pods, true)); raw != StatusOf(dep, pods) {
		return raw.Message
	}
	return ""
}

func finish(st Status) Status {
	// Kubernetes' reasons and messages may be empty (FuzzStatusOf found a ReplicaFailure
	// with neither) or long (a kubelet error quoting a whole registry answer): every
	// status says something, and at most MaxStatusMessage bytes of it.
	if strings.TrimSpace(st.Message) == "" {
		st.Message = defaultMessage[st.Status]
	}
	st.Message = Clip(st.Message, MaxStatusMessage)
	return st
}

// MaxStatusMessage bounds a status message (events, GET's status_message).
const MaxStatusMessage = 1024

var defaultMessage = map[v1alpha1.ContainerStatus]string{
	v1alpha1.PENDING: "The container is not running yet.",
	v1alpha1.RUNNING: "Container is running.",
	v1alpha1.FAILED:  "The container failed.",
	v1alpha1.UNKNOWN: "The container's state is unknown.",
	v1alpha1.DELETED: "Container deleted.",
}

// Clip shortens s to at most n bytes (on a rune boundary), saying how much was left out.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	suffix := fmt.Sprintf("… (%d bytes in all)", len(s))
	cut := max(n-len(suffix), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + suffix
}

// statusOf is the status; raw keeps the texts withhold.go keeps out of it.
func statusOf(dep *Deployment, pods []*Pod, raw bool) Status {
	if dep == nil || dep.Deleting {
		return Status{v1alpha1.DELETED, "Container deleted."}
	}
	if dep.ImageRefused != "" {
		return Status{v1alpha1.PENDING, "The image is refused: " + dep.ImageRefused}
	}
	if dep.ImagePending != "" {
		return Status{v1alpha1.PENDING, "The image is not resolved yet: " + dep.ImagePending}
	}
	// Asked to run nothing (scaled to zero by hand): the design's "Replicas = 0 ->
	// FAILED". Decided on the desired count, not on the pods: a new Deployment has no
	// pod for a moment (PENDING), and a scaled-down one's pod may still be terminating.
	if r := dep.Replicas; r != nil && *r == 0 {
		return Status{v1alpha1.FAILED, "Deployment scaled to zero replicas: the container is not running."}
	}
	if pod := PickPod(pods); pod != nil {
		return pastDeadline(dep, pod, podStatus(pod, raw))
	}
	return deploymentStatus(dep, raw)
}

// deadlineNote is what a stuck pod's status message says once its Deployment is past
// its progress deadline.
const deadlineNote = "; past the Deployment's progress deadline (ProgressDeadlineExceeded)"

// pastDeadline is the status of a pod that speaks for a Deployment past its progress
// deadline (Progressing=False, ProgressDeadlineExceeded): the pod's own (PENDING for a
// pull that fails, RUNNING for a crash loop in phase Running), with the deadline said in
// the message when the pod is stuck (PENDING, or RUNNING but not ready). Not FAILED, as
// DCM's embedded provider reports: Kubernetes does nothing about a passed deadline but
// set the condition; the kubelet keeps pulling and restarting, and the container runs
// once the image can be pulled or the process stays up, with nothing done by anyone.
// DCM takes FAILED for good: its placement tears the whole run down on FAILED and does
// not resume it on a later RUNNING; and DCM's end-to-end tests want a pod stuck on a bad
// image PENDING, a crash-looping pod in phase Running RUNNING (dcm-contracts: "Status
// events"). With no pod, a Deployment past its deadline is FAILED (deploymentStatus).
func pastDeadline(d *Deployment, p *Pod, st Status) Status {
	stuck := st.Status == v1alpha1.PENDING || (st.Status == v1alpha1.RUNNING && (p.Container == nil || !p.Container.Ready))
	if stuck && d.Progressing.Status == corev1.ConditionFalse && strings.TrimSpace(d.Progressing.Reason) == deadlineExceeded {
		st.Message = strings.TrimSuffix(orDefault(st.Message, defaultMessage[st.Status]), ".") + deadlineNote
	}
	return st
}

// deadlineExceeded is the Progressing condition's reason once a Deployment is past its
// spec.progressDeadlineSeconds.
const deadlineExceeded = "ProgressDeadlineExceeded"

// PickPod chooses the pod that speaks for the container when there are several (a
// rollout, an eviction, a ReplicaSet replacing a failed pod): terminating pods only when
// nothing else is left; a Running pod before any other, so an old evicted or failed pod
// never masks a healthy new one; then the newest. Ties break on the name, so the choice
// is deterministic.
func PickPod(pods []*Pod) *Pod {
	var best *Pod
	for _, p := range pods {
		if p == nil {
			continue
		}
		if best == nil || podRank(p, best) {
			best = p
		}
	}
	return best
}

// podRank reports whether a should be preferred over b.
func podRank(a, b *Pod) bool {
	aLive, bLive := !a.Deleting, !b.Deleting
	if aLive != bLive {
		return aLive
	}
	aRun, bRun := a.Phase == corev1.PodRunning, b.Phase == corev1.PodRunning
	if aRun != bRun {
		return aRun
	}
	if !a.Created.Equal(b.Created) {
		return b.Created.Before(a.Created)
	}
	return a.Name > b.Name
}

func podStatus(p *Pod, raw bool) Status {
	cs := p.Container
	switch p.Phase {
	case corev1.PodRunning:
		if nodeLost(p) {
			return Status{v1alpha1.UNKNOWN, "NodeNotReady: the node running the container stopped reporting; its last known state was running"}
		}
		if cs != nil && cs.Waiting != nil {
			return Status{v1alpha1.RUNNING, waitingMessage(cs, raw)}
		}
		if cs != nil && cs.Running && !cs.Ready {
			return Status{v1alpha1.RUNNING, "Container is running but not ready" + restarts(cs) + "."}
		}
		return Status{v1alpha1.RUNNING, "Container is running."}
	case corev1.PodPending:
		if cs != nil && cs.Waiting != nil && cs.Waiting.Reason != "" && cs.Waiting.Reason != "ContainerCreating" {
			return Status{v1alpha1.PENDING, waitingMessage(cs, raw)}
		}
		if c := p.NotScheduled; c != nil {
			return Status{v1alpha1.PENDING, joinReason(c.Reason, c.Message)}
		}
		return Status{v1alpha1.PENDING, "Container is being created."}
	case corev1.PodFailed:
		if cs != nil && cs.Terminated != nil {
			t := cs.Terminated
			return Status{v1alpha1.FAILED, fmt.Sprintf("%s (exit code %d)", joinReason(orDefault(t.Reason, "Terminated"), t.Message), t.Code)}
		}
		return Status{v1alpha1.FAILED, joinReason(orDefault(p.Reason, "PodFailed"), p.Message)}
	case corev1.PodSucceeded:
		// A Deployment's container is meant to run forever; exiting is a failure to DCM.
		return Status{v1alpha1.FAILED, "Container exited."}
	default:
		return Status{v1alpha1.UNKNOWN, joinReason(orDefault(p.Reason, "Unknown"),
			orDefault(p.Message, "the node running the container is not reporting"))}
	}
}

func deploymentStatus(d *Deployment, raw bool) Status {
	switch {
	case d.ReplicaFailure.Status == corev1.ConditionTrue:
		return Status{v1alpha1.FAILED, shown(d.ReplicaFailure.Reason, d.ReplicaFailure.Message, raw)}
	case d.Progressing.Status == corev1.ConditionFalse:
		return Status{v1alpha1.FAILED, shown(d.Progressing.Reason, d.Progressing.Message, raw)}
	case d.Available.Status == corev1.ConditionFalse:
		return Status{v1alpha1.PENDING, joinReason(d.Available.Reason, d.Available.Message)}
	}
	// Status.Replicas is 0 for a moment after every create, before the ReplicaSet makes
	// its pod, so 0 observed replicas alone means "not yet", not FAILED (0 desired
	// replicas is FAILED, above); a ReplicaSet that cannot create the pod says so with
	// ReplicaFailure.
	return Status{v1alpha1.PENDING, "Waiting for the pod to be created."}
}

// nodeLost reports a pod whose node stopped reporting. A real cluster does not change
// the phase then: the node lifecycle controller only turns the pod's Ready condition
// False, leaving ContainersReady True (the kubelet, which would keep the two
// consistent, is not there). Our pods have no readiness gates, so that combination
// means exactly this.
func nodeLost(p *Pod) bool {
	return !p.ReadinessGates && p.Ready == corev1.ConditionFalse && p.ContainersReady == corev1.ConditionTrue
}

func waitingMessage(cs *ContainerStatus, raw bool) string {
	msg := shown(cs.Waiting.Reason, cs.Waiting.Message, raw) + restarts(cs)
	if t := cs.LastExit; t != nil {
		msg += fmt.Sprintf("; last exit: %s, code %d", orDefault(t.Reason, "Terminated"), t.Code)
	}
	return msg
}

func restarts(cs *ContainerStatus) string {
	if cs.Restarts == 0 {
		return ""
	}
	return fmt.Sprintf(" (restarts: %d)", cs.Restarts)
}

func joinReason(reason, message string) string {
	reason, message = strings.TrimSpace(reason), strings.TrimSpace(message)
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}
