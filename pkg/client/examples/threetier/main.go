// Command threetier runs what DCM's three-tier demo provider does with a container
// provider, through the generated Go client: it creates the database tier (a container
// with an internal port), waits for its Service name and deletes it.
//
//	go run ./pkg/client/examples/threetier -url http://127.0.0.1:8080
//
// The code to read is in the flow package beside it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/dcm-project/k8s-container-sp/pkg/client"
	"github.com/dcm-project/k8s-container-sp/pkg/client/examples/threetier/flow"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "the provider's URL")
	id := flag.String("id", "db", "the container's id")
	image := flag.String("image", "docker.io/library/postgres:17", "the container's image")
	port := flag.Int("port", 5432, "the container port, exposed inside the cluster")
	tokenFile := flag.String("token-file", "", "a file holding the provider's bearer token (when it runs with SP_API_TOKEN_FILE)")
	timeout := flag.Duration("timeout", 2*time.Minute, "how long to wait for the Service name")
	flag.Parse()
	log.SetFlags(0)

	var opts []client.ClientOption
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			log.Fatal(err)
		}
		token := strings.TrimSpace(string(b))
		opts = append(opts, client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	}
	c, err := client.NewClientWithResponses(*url, opts...)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := flow.Run(ctx, c, flow.Options{
		ID: *id, Image: *image, Port: int32(*port), Timeout: *timeout,
		Env:  []client.EnvVar{{Name: "POSTGRES_PASSWORD", Value: "example"}},
		Logf: log.Printf,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.ServiceName)
}
