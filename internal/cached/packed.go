package cached

import (
	"encoding/binary"

	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// A packed string holds a cached object's variable-length fields (a container's
// command, args, env, ports and resources; a Service's ports; a pod's messages) in one
// allocation instead of a slice header and an allocation for each: each string as its
// length (a uvarint) and its bytes, each list as its length + 1 (0: nil) and its items.
// What is unpacked shares the packed string's bytes (views are never written).

type packer []byte

func (p packer) str(s string) packer {
	return append(binary.AppendUvarint(p, uint64(len(s))), s...)
}

func (p packer) n(n int) packer { return binary.AppendUvarint(p, uint64(n)) }

// list writes a list's length (+1; 0 for nil).
func (p packer) list(n int, isNil bool) packer {
	if isNil {
		return p.n(0)
	}
	return p.n(n + 1)
}

func (p packer) strs(ss []string) packer {
	p = p.list(len(ss), ss == nil)
	for _, s := range ss {
		p = p.str(s)
	}
	return p
}

// unpacker reads a packed string back. A packed string is only ever one this file
// wrote, so it is read without checks but never past its end (a bad one reads as
// empty fields).
type unpacker struct{ s string }

func (u *unpacker) n() int {
	var x uint64
	for shift := 0; len(u.s) > 0 && shift < 64; shift += 7 {
		b := u.s[0]
		u.s = u.s[1:]
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			break
		}
	}
	return int(min(x, 1<<31))
}

func (u *unpacker) str() string {
	n := min(u.n(), len(u.s))
	s := u.s[:n]
	u.s = u.s[n:]
	return s
}

// list reads a list's length; false when the list is nil.
func (u *unpacker) list() (int, bool) {
	n := u.n()
	if n == 0 {
		return 0, false
	}
	return min(n-1, len(u.s)), true // each item takes a byte at least
}

func (u *unpacker) strs() []string {
	n, ok := u.list()
	if !ok {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = u.str()
	}
	return out
}

// packContainer packs what a Deployment's view reads of its container and resources.
func packContainer(c container.Container, r v1alpha1.ContainerResources) string {
	p := packer(nil).str(c.Name).str(c.Image).strs(c.Command).strs(c.Args)
	p = p.list(len(c.Env), c.Env == nil)
	for _, e := range c.Env {
		p = p.str(e.Name).str(e.Value)
	}
	p = p.list(len(c.Ports), c.Ports == nil)
	for _, port := range c.Ports {
		p = p.n(int(uint32(port)))
	}
	return string(p.str(cpuJSON(r.Cpu.Min)).str(cpuJSON(r.Cpu.Max)).str(r.Memory.Min).str(r.Memory.Max))
}

func unpackContainer(s string) (container.Container, v1alpha1.ContainerResources) {
	u := unpacker{s}
	c := container.Container{Name: u.str(), Image: u.str(), Command: u.strs(), Args: u.strs()}
	if n, ok := u.list(); ok {
		c.Env = make([]container.EnvVar, n)
		for i := range c.Env {
			c.Env[i] = container.EnvVar{Name: u.str(), Value: u.str()}
		}
	}
	if n, ok := u.list(); ok {
		c.Ports = make([]int32, n)
		for i := range c.Ports {
			c.Ports[i] = int32(uint32(u.n()))
		}
	}
	var r v1alpha1.ContainerResources
	r.Cpu.Min, r.Cpu.Max = cpuOf(u.str()), cpuOf(u.str())
	r.Memory.Min, r.Memory.Max = u.str(), u.str()
	return c, r
}

// cpuJSON is a CPU quantity as its JSON ("" when unset).
func cpuJSON(q v1alpha1.CpuQuantity) string {
	b, err := q.MarshalJSON()
	if err != nil || string(b) == "null" {
		return ""
	}
	return string(b)
}

func cpuOf(s string) v1alpha1.CpuQuantity {
	var q v1alpha1.CpuQuantity
	if s != "" {
		_ = q.UnmarshalJSON([]byte(s))
	}
	return q
}

// packService packs a Service's ports (a list, nil apart from empty), cluster IP and
// external address.
func packService(ports []container.ServicePort, clusterIP, externalIP string) string {
	p := packer(nil).list(len(ports), ports == nil)
	for _, sp := range ports {
		p = p.n(int(uint32(sp.Port))).n(int(uint32(sp.TargetPort))).n(int(uint32(sp.NodePort))).str(string(sp.Protocol))
	}
	return string(p.str(clusterIP).str(externalIP))
}

func unpackService(s string) (ports []container.ServicePort, clusterIP, externalIP string) {
	u := unpacker{s}
	if n, ok := u.list(); ok {
		ports = make([]container.ServicePort, n)
		for i := range ports {
			ports[i] = container.ServicePort{Port: int32(uint32(u.n())), TargetPort: int32(uint32(u.n())), NodePort: int32(uint32(u.n()))}
			ports[i].Protocol = corev1.Protocol(u.str())
		}
	}
	return ports, u.str(), u.str()
}

// packStrings packs a few strings, "" when all are empty (most pods have no message).
func packStrings(ss []string) string {
	empty := true
	for _, s := range ss {
		empty = empty && s == ""
	}
	if empty {
		return ""
	}
	var p packer
	for _, s := range ss {
		p = p.str(s)
	}
	return string(p)
}

// unpackStrings reads n strings packStrings packed.
func unpackStrings(s string, n int) []string {
	out := make([]string, n)
	if s == "" {
		return out
	}
	u := unpacker{s}
	for i := range out {
		out[i] = u.str()
	}
	return out
}
