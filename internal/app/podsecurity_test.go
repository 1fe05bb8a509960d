package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

func TestPodSecurityProfile(t *testing.T) {
	namespace := func(enforce string) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dcm", Labels: map[string]string{}}}
		if enforce != "" {
			ns.Labels["pod-security.kubernetes.io/enforce"] = enforce
		}
		return ns
	}
	forbidden := apierrors.NewForbidden(corev1.Resource("namespaces"), "dcm", errors.New("no get"))
	cases := []struct {
		name       string
		configured string
		ns         *corev1.Namespace // nil: the read fails
		want       container.PodSecurity
		reads      int
	}{
		{"configured baseline: no read", "baseline", namespace("restricted"), container.Baseline, 0},
		{"configured restricted: no read", "restricted", namespace(""), container.Restricted, 0},
		{"auto, the namespace enforces restricted", "auto", namespace("restricted"), container.Restricted, 1},
		{"auto, the namespace enforces baseline", "auto", namespace("baseline"), container.Baseline, 1},
		{"auto, no label", "auto", namespace(""), container.Baseline, 1},
		{"auto, the namespace cannot be read", "auto", nil, container.Baseline, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.ns != nil {
				client = fake.NewClientset(tc.ns)
			} else {
				client.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, forbidden })
			}
			p := &podSecurity{client: client, namespace: "dcm", configured: tc.configured, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			before := container.PodSecurity(tc.configured)
			if tc.configured == "auto" {
				before = container.Baseline
			}
			if got := p.profile(); got != before {
				t.Errorf("before start: %q, want %q", got, before)
			}
			if err := p.start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := p.profile(); got != tc.want {
				t.Errorf("profile %q, want %q", got, tc.want)
			}
			if n := len(client.Actions()); n != tc.reads {
				t.Errorf("%d reads of the namespace, want %d", n, tc.reads)
			}
		})
	}
}
