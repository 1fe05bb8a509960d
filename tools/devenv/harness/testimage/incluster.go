package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// saDir is where the kubelet mounts the service account's projected token, CA and
// namespace (as client-go's rest.InClusterConfig reads them).
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// inCluster prints, one line each:
//
//	incluster: version 200 <gitVersion> after <n> attempts, <elapsed>
//	incluster: pods <status> <detail>
//	dial <addr>: ok <first line the server sent, if any>   |   dial <addr>: error <err>
func inCluster(args []string) {
	if err := apiServer(); err != nil {
		fmt.Println("incluster: error", err)
	}
	targets := args
	if d := os.Getenv("DIAL"); d != "" {
		targets = append(strings.Split(d, ","), targets...)
	}
	for _, t := range targets {
		if t = strings.TrimSpace(t); t != "" {
			fmt.Println(dial(t))
		}
	}
}

func apiServer() error {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT unset: not in a cluster")
	}
	ca, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return errors.New("no certificate in ca.crt")
	}
	ns, err := os.ReadFile(filepath.Join(saDir, "namespace"))
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	base := "https://" + net.JoinHostPort(host, port)
	get := func(path string) (int, []byte, error) {
		token, err := os.ReadFile(filepath.Join(saDir, "token")) // re-read: the kubelet rotates it
		if err != nil {
			return 0, nil, err
		}
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, body, err
	}

	// Retried: the first packets may race the pod's network set-up.
	start := time.Now()
	var lastErr error
	for attempt := 1; ; attempt++ {
		code, body, err := get("/version")
		if err == nil && code == http.StatusOK {
			var v struct {
				GitVersion string `json:"gitVersion"`
			}
			_ = json.Unmarshal(body, &v)
			fmt.Printf("incluster: version 200 %s after %d attempts, %s\n", v.GitVersion, attempt,
				time.Since(start).Round(time.Millisecond))
			break
		}
		if err == nil {
			err = fmt.Errorf("status %d: %s", code, strings.TrimSpace(string(body)))
		}
		if lastErr == nil || err.Error() != lastErr.Error() {
			fmt.Println("incluster: /version:", err)
		}
		lastErr = err
		if time.Since(start) > 2*time.Minute {
			return fmt.Errorf("no /version after %s: %w", time.Since(start).Round(time.Second), err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	code, body, err := get("/api/v1/namespaces/" + strings.TrimSpace(string(ns)) + "/pods")
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	detail := ""
	if code == http.StatusOK {
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		_ = json.Unmarshal(body, &list)
		detail = fmt.Sprintf("%d items", len(list.Items))
	} else {
		var st struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &st)
		detail = st.Reason + ": " + st.Message
	}
	fmt.Printf("incluster: pods %d %s\n", code, detail)
	return nil
}

// dial connects to addr over TCP and reports the first line the server sends within
// a second (NATS sends INFO at once; an HTTP server sends nothing).
func dial(addr string) string {
	start := time.Now()
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return fmt.Sprintf("dial %s: error %v (%s)", addr, err, time.Since(start).Round(time.Millisecond))
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if len(line) > 60 {
		line = line[:60]
	}
	return strings.TrimSpace("dial " + addr + ": ok " + strings.TrimSpace(line))
}
