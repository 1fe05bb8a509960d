package app_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/pkg/client"
	"github.com/dcm-project/k8s-container-sp/pkg/client/examples/threetier/flow"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// The generated Go client (pkg/client) against the running service, through the flow
// of DCM's three-tier demo: the same code as go run ./pkg/client/examples/threetier.
// Create db with an internal port, poll GET until service.name is set, DELETE; the name
// is the container's Service in the cluster, and after the DELETE a GET is a 404 and the
// objects are gone. kwok's node is enough: the Service exists from the create on.
func TestClientThreeTierFlow(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns)
	p.waitSynced(t)
	cs := testenv.Cluster(t).Client
	c, err := client.NewClientWithResponses(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	checked := false
	res, err := flow.Run(ctx, c, flow.Options{
		ID: "db", Image: "docker.io/library/postgres:17", Port: 5432,
		Env:  []client.EnvVar{{Name: "POSTGRES_PASSWORD", Value: "example"}},
		Poll: 100 * time.Millisecond, Timeout: 30 * time.Second, Logf: t.Logf,
		BeforeDelete: func(ctx context.Context, ctr *client.Container) error {
			checked = true
			if ctr.Id == nil || *ctr.Id != "db" {
				return fmt.Errorf("GET's id %v, want db", ctr.Id)
			}
			svc, err := cs.CoreV1().Services(ns).Get(ctx, ctr.Service.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("service.name %q is no Service in the cluster: %w", ctr.Service.Name, err)
			}
			if got := container.InstanceID(svc.Labels); got != "db" {
				return fmt.Errorf("the Service %s belongs to %q, want db", svc.Name, got)
			}
			if ctr.Service.Type != client.ClusterIP || len(ctr.Service.Ports) != 1 || ctr.Service.Ports[0].Port != 5432 {
				return fmt.Errorf("GET's service %+v, want ClusterIP on 5432", *ctr.Service)
			}
			if ctr.Service.ClusterIp == nil || *ctr.Service.ClusterIp != svc.Spec.ClusterIP {
				return fmt.Errorf("GET's cluster_ip %v, the Service's %q", ctr.Service.ClusterIp, svc.Spec.ClusterIP)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !checked || res.ServiceName == "" {
		t.Fatalf("the flow returned without a Service name: %+v", res)
	}

	// Deleted: the GET is a 404 at once, and the Deployment, Service and record go.
	got, err := c.GetContainerWithResponse(ctx, "db")
	if err != nil {
		t.Fatal(err)
	}
	if got.StatusCode() != http.StatusNotFound || got.ApplicationproblemJSON404 == nil {
		t.Fatalf("GET after the DELETE: %d %s, want a 404 problem", got.StatusCode(), got.Body)
	}
	expectNothing(t, ns)
	// A second DELETE is a 404, which the flow counts as deleted.
	if err := flow.Delete(ctx, c, "db"); err != nil {
		t.Errorf("DELETE of a deleted container: %v", err)
	}
}
