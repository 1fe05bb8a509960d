package client_test

import (
	"context"
	"fmt"
	"os"

	"github.com/dcm-project/k8s-container-sp/pkg/client"
	"github.com/dcm-project/k8s-container-sp/pkg/client/examples/threetier/flow"
)

// Create a container with an internal port, wait for its Service name, delete it: what
// DCM's three-tier demo provider does for its database tier (the flow package has the
// calls). It needs a running provider, at SP_URL here; go test only compiles it.
func Example() {
	url := os.Getenv("SP_URL") // e.g. http://127.0.0.1:8080
	if url == "" {
		return
	}
	c, err := client.NewClientWithResponses(url)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := flow.Run(context.Background(), c, flow.Options{ID: "db", Image: "docker.io/library/postgres:17", Port: 5432})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("the database's DNS name:", res.ServiceName)
}
