package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// dialer plays a tenant probing its network, and the pods a test puts in its way:
//
//   - HTTP on each port of $PORTS (comma-separated, default 8080): GET /healthz answers
//     ok; GET /dial?addr=HOST:PORT[&timeout=2s] tries one TCP connection from this pod
//     and answers "ok <first line the server sent within 300 ms, if any>" or "error
//     <why>" (always 200: the answer is the result);
//   - for each LISTEN=HOST:PORT of $RELAY (comma-separated), a TCP relay: what connects
//     to :LISTEN is joined to HOST:PORT, so a pod can stand for a service that runs on
//     the node (the harness's NATS, DCM's registry) as it would run in a cluster.
func dialer() {
	ports := os.Getenv("PORTS")
	if ports == "" {
		ports = "8080"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/dial", func(w http.ResponseWriter, r *http.Request) {
		timeout, err := time.ParseDuration(r.URL.Query().Get("timeout"))
		if err != nil || timeout <= 0 || timeout > 30*time.Second {
			timeout = 2 * time.Second
		}
		fmt.Fprintln(w, dialOnce(r.URL.Query().Get("addr"), timeout))
	})
	var wg sync.WaitGroup
	for p := range strings.SplitSeq(ports, ",") {
		addr := ":" + strings.TrimSpace(p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmt.Println("listening on", addr)
			if err := http.ListenAndServe(addr, mux); err != nil {
				fmt.Fprintln(os.Stderr, "listen:", err)
				os.Exit(1)
			}
		}()
	}
	if relays := os.Getenv("RELAY"); relays != "" {
		for r := range strings.SplitSeq(relays, ",") {
			listen, target, ok := strings.Cut(strings.TrimSpace(r), "=")
			if !ok {
				fmt.Fprintln(os.Stderr, "RELAY: want LISTEN=HOST:PORT, got", r)
				os.Exit(64)
			}
			ln, err := net.Listen("tcp", ":"+listen)
			if err != nil {
				fmt.Fprintln(os.Stderr, "relay listen:", err)
				os.Exit(1)
			}
			fmt.Println("relaying", ln.Addr(), "to", target)
			go relay(ln, target)
		}
	}
	wg.Wait()
}

func dialOnce(addr string, timeout time.Duration) string {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "error bad address: " + err.Error()
	}
	start := time.Now()
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return fmt.Sprintf("error %v (%s)", err, time.Since(start).Round(time.Millisecond))
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 60)
	n, _ := conn.Read(buf)
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	return strings.TrimSpace(fmt.Sprintf("ok %s", strings.TrimSpace(line)))
}

func relay(ln net.Listener, target string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "relay accept:", err)
			return
		}
		go func() {
			defer in.Close()
			out, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				fmt.Fprintln(os.Stderr, "relay to", target+":", err)
				return
			}
			defer out.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
			<-done
		}()
	}
}
