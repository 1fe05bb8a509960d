// Command testimage is the one static binary inside every test image of the harness's real
// node (see ../realnode_images.go): the first argument picks the workload it plays, so
// each behaviour a status test needs is one image away, with no registry and no network.
//
//	pause   wait for SIGTERM (also the pod sandbox image)
//	web     HTTP on :8080, GET /healthz answers 200
//	web80   the same on :80 (fails without CAP_NET_BIND_SERVICE)
//	crash   exit 1 at once
//	exit0   exit 0 at once
//	oom     allocate memory until the cgroup limit kills it (stops at 2 GiB without one)
//	setuid  chown a file and setuid as root (fails with capabilities dropped), then wait
//	netraw  open a raw socket (ping's, ARP and ICMP spoofing's): exit 42 if it opens,
//	        wait if it is refused (no CAP_NET_RAW)
//	fill    write $FILL_MIB MiB (default 64) to /fill, then wait
//	dial    HTTP on each port of $PORTS whose GET /dial?addr=HOST:PORT tries a TCP
//	        connection from the pod and answers ok or error; TCP relays from $RELAY
//	        (LISTEN=HOST:PORT,...) (dial.go)
//	incluster  what client-go's rest.InClusterConfig does, with the standard library: the
//	        service account's token and CA, GET /version (retried until it answers) and
//	        the namespace's pods from https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT;
//	        then dial each host:port of $DIAL (comma-separated) and the further arguments,
//	        one result line each, and wait
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func waitSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
}

func main() {
	role := "pause"
	if len(os.Args) > 1 {
		role = os.Args[1]
	}
	switch role {
	case "pause":
		waitSignal()
	case "web", "web80":
		serve(map[string]string{"web": ":8080", "web80": ":80"}[role])
	case "crash":
		fmt.Fprintln(os.Stderr, "crashing on purpose")
		os.Exit(1)
	case "exit0":
		fmt.Println("done")
	case "oom":
		oom()
	case "setuid":
		setuid()
	case "incluster":
		inCluster(os.Args[2:])
		waitSignal()
	case "dial":
		dialer()
	case "netraw":
		netRaw()
	case "fill":
		fill()
	default:
		fmt.Fprintln(os.Stderr, "unknown role", role)
		os.Exit(64)
	}
}

func serve(addr string) {
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "hello from %s\n", host) })
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	fmt.Println("listening on", addr)
	if err := http.ListenAndServe(addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
}

// oom touches memory 16 MiB at a time so the pages are really used. Without a memory
// limit it stops at 2 GiB and waits rather than eat the whole machine.
func oom() {
	var hold [][]byte
	for i := 1; i <= 128; i++ {
		b := make([]byte, 16<<20)
		for j := range b {
			b[j] = 1
		}
		hold = append(hold, b)
		fmt.Printf("allocated %d MiB\n", i*16)
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Println("no memory limit hit at 2 GiB; waiting")
	waitSignal()
	_ = hold
}

// setuid does what only root with CAP_CHOWN and CAP_SETUID may do.
func setuid() {
	f := "/tmp/owned"
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		os.Exit(2)
	}
	if err := os.Chown(f, 1000, 1000); err != nil {
		fmt.Fprintln(os.Stderr, "chown:", err)
		os.Exit(3)
	}
	fmt.Println("chown ok")
	if err := syscall.Setuid(1000); err != nil {
		fmt.Fprintln(os.Stderr, "setuid:", err)
		os.Exit(4)
	}
	fmt.Println("setuid ok, uid now", os.Getuid())
	waitSignal()
}

// netRaw exits 42 when the kernel gives it a raw socket: a container with CAP_NET_RAW
// can forge packets on the node's network.
func netRaw() {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP)
	if err == nil {
		_ = syscall.Close(fd)
		fmt.Fprintln(os.Stderr, "raw socket opened: CAP_NET_RAW is granted")
		os.Exit(42)
	}
	fmt.Println("raw socket refused:", err)
	waitSignal()
}

// fill writes to the container's own filesystem (its ephemeral storage), then waits.
func fill() {
	mib := 64
	if v, err := strconv.Atoi(os.Getenv("FILL_MIB")); err == nil {
		mib = v
	}
	f, err := os.Create("/fill")
	if err != nil {
		fmt.Fprintln(os.Stderr, "create:", err)
		os.Exit(2)
	}
	chunk := make([]byte, 1<<20)
	for i := range mib {
		if _, err := f.Write(chunk); err != nil {
			fmt.Fprintln(os.Stderr, "write:", err)
			os.Exit(3)
		}
		if i%16 == 15 {
			_ = f.Sync()
		}
	}
	_ = f.Sync()
	fmt.Println("wrote", mib, "MiB")
	waitSignal()
}
