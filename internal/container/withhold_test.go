package container

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
)

// A pull failure's status keeps the reason and the tenant's reference, never the node's
// network (finding 2 of issue 34: the kubelet's dial and TLS errors came back verbatim,
// which made an image reference a port scanner); the detail is Withheld for the log.
func TestPullFailuresWithholdTheNodesNetwork(t *testing.T) {
	secret := []string{"dial tcp", "10.0.0.1:22/v2", "connection refused", "x509", "kubernetes.default", "i/o timeout", "169.254.169.254", "no such host", "10.96.0.10:53"}
	cases := []struct {
		name, reason, message, want string
		phase                       corev1.PodPhase
	}{
		{"refused port", "ErrImagePull",
			`failed to pull and unpack image "10.0.0.1:22/x:latest": failed to resolve reference "10.0.0.1:22/x:latest": failed to do request: Head "https://10.0.0.1:22/v2/x/manifests/latest": dial tcp 10.0.0.1:22: connect: connection refused`,
			`ErrImagePull: the node could not pull image "10.0.0.1:22/x:latest" (it does not exist`, corev1.PodPending},
		{"a certificate's names", "ImagePullBackOff",
			`Back-off pulling image "registry.example.com/x:v1": ErrImagePull: failed to pull and unpack image "registry.example.com/x:v1": tls: failed to verify certificate: x509: certificate is valid for kubernetes, kubernetes.default, not registry.example.com`,
			`ImagePullBackOff: the node could not pull image "registry.example.com/x:v1" and tries again with a back-off`, corev1.PodPending},
		{"timeout, after a restart (phase Running)", "ErrImagePull",
			`rpc error: code = Unknown desc = failed to pull and unpack image "docker.io/library/x:v1": failed to resolve reference "docker.io/library/x:v1": failed to do request: Head "https://169.254.169.254/v2/": dial tcp 169.254.169.254:443: i/o timeout`,
			`ErrImagePull: the node could not pull image "docker.io/library/x:v1"`, corev1.PodRunning},
		{"dns", "ErrImagePull", `failed to resolve reference "quay.io/x:v1": lookup quay.io on 10.96.0.10:53: no such host`,
			`ErrImagePull: the node could not pull image "quay.io/x:v1"`, corev1.PodPending},
		{"no reference quoted", "ErrImagePull", `dial tcp 10.0.0.1:22: connect: connection refused`,
			`ErrImagePull: the node could not pull the image (`, corev1.PodPending},
		{"invalid name", "InvalidImageName", `Failed to apply default image tag "x@@": couldn't parse image name "x@@": invalid reference format`,
			`InvalidImageName: the node could not pull the image: the node does not accept the reference`, corev1.PodPending},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("a", 0, tc.phase, withContainer(waitingCS(tc.reason, tc.message, 1)))
			dep, pods := viewsOf(deployment(), []*corev1.Pod{p})
			st := StatusOf(dep, pods)
			if !strings.HasPrefix(st.Message, tc.want) {
				t.Errorf("message %q, want it to start with %q", st.Message, tc.want)
			}
			for _, s := range secret {
				if strings.Contains(st.Message, s) {
					t.Errorf("message %q shows %q", st.Message, s)
				}
			}
			if !strings.Contains(st.Message, "(restarts: 1)") {
				t.Errorf("message %q lost the restart count", st.Message)
			}
			if d := Withheld(dep, pods); !strings.Contains(d, tc.message) {
				t.Errorf("Withheld = %q, want the kubelet's text %q", d, tc.message)
			}
		})
	}
}

func TestQuotaMessageWithheld(t *testing.T) {
	quota := `pods "web-1" is forbidden: exceeded quota: tenants, requested: limits.memory=2Gi, used: limits.memory=62Gi, limited: limits.memory=64Gi`
	dep, _ := viewsOf(deployment(cond(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate", quota)), nil)
	st := StatusOf(dep, nil)
	if st.Status != v1alpha1.FAILED || strings.Contains(st.Message, "62Gi") || !strings.HasPrefix(st.Message, "FailedCreate: the namespace's resource quota") {
		t.Errorf("status %s %q", st.Status, st.Message)
	}
	if d := Withheld(dep, nil); !strings.Contains(d, quota) {
		t.Errorf("Withheld = %q", d)
	}
	// Nothing withheld: no detail.
	dep, pods := viewsOf(deployment(), []*corev1.Pod{pod("a", 0, corev1.PodPending, withContainer(waitingCS("CrashLoopBackOff", "back-off 10s", 1)))})
	if d := Withheld(dep, pods); d != "" {
		t.Errorf("Withheld = %q, want none", d)
	}
}
