package app_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// foreignObjects makes, in ns, what another DCM provider (database, network) leaves in a
// shared namespace: a Deployment and a Service with DCM's managed-by and instance-id
// labels, the given id, and its own service type. It returns their names.
func foreignObjects(t *testing.T, ns, id, serviceType string) (dep, svc string) {
	t.Helper()
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	labels := map[string]string{
		container.LabelManagedBy:   container.ManagedByValue,
		container.LabelInstanceID:  id,
		container.LabelServiceType: serviceType,
	}
	d, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{GenerateName: serviceType + "-", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "example.invalid/db:v1"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{GenerateName: serviceType + "-", Labels: labels},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 5432}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Name, s.Name
}

// expectForeignUntouched fails unless both objects still exist and are not being deleted.
func expectForeignUntouched(t *testing.T, ns, dep, svc string) {
	t.Helper()
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, dep, metav1.GetOptions{})
	if err != nil || d.DeletionTimestamp != nil {
		t.Errorf("the other provider's Deployment %s: %v (deleting: %v)", dep, err, d.DeletionTimestamp)
	}
	s, err := cs.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{})
	if err != nil || s.DeletionTimestamp != nil {
		t.Errorf("the other provider's Service %s: %v (deleting: %v)", svc, err, s.DeletionTimestamp)
	}
}

// DCM's other providers label their objects with the same managed-by and instance-id
// labels and their own service type. A DELETE of a container id is about containers
// only: it never deletes another provider's Deployment or Service with that id, answers
// 404 when only theirs exist, and their live Deployment never holds back a container's
// DELETED (issue 23 item 3).
func TestOtherProvidersObjectsAreNeverTouched(t *testing.T) {
	ns := testenv.Namespace(t)
	nats, _ := natsWithStream(t) // a DELETED releases its record only once a stream stored it
	events := newSink(t, nats.URL)
	p := startProvider(t, ns, withNATS(nats.URL))
	p.waitSynced(t)

	// Only a database provider's objects carry db-1: not a container.
	dbDep, dbSvc := foreignObjects(t, ns, "db-1", "database")
	if r := do(t, http.MethodGet, p.URL+containers+"/db-1", nil); r.Status != http.StatusNotFound {
		t.Errorf("GET db-1: %d %s", r.Status, r.Body)
	}
	if r := do(t, http.MethodDelete, p.URL+containers+"/db-1", nil); r.Status != http.StatusNotFound {
		t.Errorf("DELETE db-1: %d %s", r.Status, r.Body)
	}

	// A container and a network provider's objects share the id c-1: the container's
	// life is its own, from create to DELETED.
	netDep, netSvc := foreignObjects(t, ns, "c-1", "network")
	body := spec("web", "quay.io/myapp:v1", withPorts(port(8080, "internal")))
	if r := do(t, http.MethodPost, p.URL+containers+"?id=c-1", body); r.Status != http.StatusCreated {
		t.Fatalf("POST c-1: %d %s", r.Status, r.Body)
	}
	events.waitStatus("c-1", "RUNNING", "", 30*time.Second)
	if r := do(t, http.MethodDelete, p.URL+containers+"/c-1", nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE c-1: %d %s", r.Status, r.Body)
	}
	events.waitStatus("c-1", "DELETED", "", 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "the container's own objects gone", func() error {
		sel := container.InstanceSelector("c-1")
		if d, s, l := countBySelector(t, ns, sel); d+s+l != 0 {
			return fmt.Errorf("%d Deployments, %d Services, %d records of the container c-1", d, s, l)
		}
		return nil
	})

	expectForeignUntouched(t, ns, dbDep, dbSvc)
	expectForeignUntouched(t, ns, netDep, netSvc)
}
