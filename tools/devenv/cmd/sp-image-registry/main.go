// Command sp-image-registry is the real node's OCI registry (see package imageregistry):
// it serves on a loopback address until SIGTERM, blobs under -dir, one log line per
// request on stdout.
//
//	sp-image-registry -addr 127.0.0.1:PORT -dir DIR
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/imageregistry"
)

func main() {
	addr := flag.String("addr", "", "loopback address to serve on, 127.0.0.1:PORT")
	dir := flag.String("dir", "", "folder for the blobs")
	flag.Parse()
	if err := run(*addr, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "sp-image-registry:", err)
		os.Exit(1)
	}
}

func run(addr, dir string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || dir == "" {
		return errors.New("usage: sp-image-registry -addr 127.0.0.1:PORT -dir DIR")
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-addr %s: only a loopback address (nothing outside this machine may pull)", addr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: imageregistry.New(addr, dir, os.Stdout), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Printf("sp-image-registry: serving on %s, blobs in %s\n", addr, dir)
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
