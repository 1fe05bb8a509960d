package harness

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The kubelet's life cycle on its own: a test can take it away (the node goes NotReady
// while containerd keeps the pods running, as when a real kubelet dies) and bring it back.

// StopKubelet stops the kubelet by PID; containerd and the pods keep running, so the node
// stops reporting and goes NotReady after the controller-manager's grace period (about
// 50 s), as when a real kubelet dies. On a node shared by the whole test run (make test)
// that affects every test using it.
func (n *RealNode) StopKubelet() error {
	unlock, err := lockRealNode()
	if err != nil {
		return err
	}
	defer unlock()
	n.reload()
	if n.rec.Kubelet != nil {
		n.rec.Kubelet.stop(15 * time.Second)
		if n.rec.Kubelet.running() {
			return fmt.Errorf("kubelet (PID %d) did not stop", n.rec.Kubelet.PID)
		}
	}
	n.rec.Kubelet = nil
	return n.save()
}

// StartKubelet starts the kubelet again with the same configuration and waits until the
// node reports Ready from the new process. A kubelet started here for a shared node is
// detached, so it outlives a test binary and stays the node owner's to stop.
func (n *RealNode) StartKubelet(ctx context.Context) error {
	unlock, err := lockRealNode()
	if err != nil {
		return err
	}
	defer unlock()
	n.reload()
	if n.rec.Kubelet != nil && n.rec.Kubelet.running() {
		return nil
	}
	if n.rec.Containerd == nil || !n.rec.Containerd.running() {
		return errors.New("containerd of the real node is not running")
	}
	return n.startKubelet(ctx, n.rec.Detached || !n.owned)
}

func (n *RealNode) startKubelet(ctx context.Context, detached bool) error {
	since := time.Now().Truncate(time.Second)
	p, err := startProcess("kubelet", n.rec.KubeletBin, n.rec.KubeletArgs, n.Dir, detached, sbinPath())
	if err != nil {
		return err
	}
	n.rec.Kubelet = p
	if err := n.save(); err != nil {
		return err
	}
	cs, err := n.client()
	if err != nil {
		return err
	}
	return waitFor("node "+RealNodeName+" Ready", 2*time.Minute, []*process{n.rec.Containerd, p}, func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		node, err := cs.CoreV1().Nodes().Get(cctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status != corev1.ConditionTrue {
					return fmt.Errorf("node condition Ready=%s: %s", c.Status, c.Message)
				}
				if c.LastHeartbeatTime.Time.Before(since) {
					return errors.New("node Ready, but not yet reported by the new kubelet")
				}
				return nil
			}
		}
		return errors.New("no Ready condition yet")
	})
}

func (n *RealNode) client() (kubernetes.Interface, error) {
	cfg, err := (&Cluster{Kubeconfig: n.Kubeconfig}).RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// ctr runs containerd's CLI against the node's containerd, in the CRI namespace.
func (n *RealNode) ctr(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ctr, err := findCmd("ctr")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, ctr, append([]string{"--address", containerdSocket, "-n", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
