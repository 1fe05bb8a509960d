package harness

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
)

// StopComponent stops one control-plane process by name ("kube-apiserver", "kwok", …),
// by PID, for an outage; StartComponent brings it back. Only for a cluster this process
// started (Start), whose processes it knows.
func (c *Cluster) StopComponent(name string) error {
	p, err := c.component(name)
	if err != nil {
		return err
	}
	p.stop(5 * time.Second)
	return nil
}

// StartComponent starts a component stopped with StopComponent again, with the same
// binary and arguments (same ports, certificates and data), and for the apiserver waits
// until it answers /readyz.
func (c *Cluster) StartComponent(ctx context.Context, name string) error {
	for i, p := range c.Processes {
		if p.Name != name {
			continue
		}
		if p.running() {
			return nil
		}
		if p.cmd == nil {
			return fmt.Errorf("%s was not started by this process", name)
		}
		np, err := c.start(p.Name, p.Bin, p.cmd.Args[1:], p.cmd.Env)
		if err != nil {
			return err
		}
		c.Processes[i] = np
		if err := c.saveState(); err != nil {
			return err
		}
		if name != "kube-apiserver" {
			return nil
		}
		cfg, err := c.RESTConfig()
		if err != nil {
			return err
		}
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return err
		}
		return waitFor("kube-apiserver /readyz", 90*time.Second, []*process{np}, func() error {
			if err := ctx.Err(); err != nil {
				return nil // give up waiting; the caller's context is done
			}
			return httpOK(hc, c.Server+"/readyz", cfg.BearerToken)
		})
	}
	return fmt.Errorf("no component %q", name)
}

// start starts one control-plane process on the cluster's CPUs.
func (c *Cluster) start(name, bin string, args, env []string) (*process, error) {
	p, err := startProcess(name, bin, args, c.Dir, c.detached, env...)
	if err != nil {
		return nil, err
	}
	if err := pin(p.PID, c.cpus); err != nil {
		p.stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

func (c *Cluster) component(name string) (*process, error) {
	for _, p := range c.Processes {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no component %q", name)
}
