package bench

import (
	"testing"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The phase's containers are as large as the limit allows: at most the limit, and one
// more byte of env value would pass it; every id of the phase's length gives the same size.
func TestMaxSizedSpec(t *testing.T) {
	cases := []struct {
		ns    string
		limit int
	}{
		{"bench-limit", container.DefaultMaxObjectBytes},
		{"bench-limit", 16 << 10},
		{"a-longer-namespace-name", container.DefaultMaxObjectBytes},
	}
	for _, c := range cases {
		spec, n, err := maxSizedSpec(c.ns, len("limit-00000"), c.limit)
		if err != nil {
			t.Fatalf("%s, %d: %v", c.ns, c.limit, err)
		}
		if n > c.limit || n < c.limit-2 {
			t.Errorf("%s, %d: %d bytes", c.ns, c.limit, n)
		}
		// The fill's first and last, and the one more create's: the service refuses it
		// for the limit on containers (507), not for its size (400).
		for _, id := range []string{"limit-00000", "limit-09999", oneMoreID("limit-", container.DefaultMaxContainers)} {
			objs, err := objectsOf(c.ns, id, &spec)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := container.ObjectBytes(objs); got != n {
				t.Errorf("%s: %d bytes, want %d", id, got, n)
			}
			if vs := container.CheckSize(objs, c.limit); len(vs) > 0 {
				t.Errorf("%s: refused: %v", id, vs)
			}
		}
		env := *spec.Process.Env
		env[0].Value += "x"
		objs, _ := objectsOf(c.ns, "limit-00000", &spec)
		if vs := container.CheckSize(objs, c.limit); len(vs) == 0 {
			t.Errorf("%s, %d: one more byte still accepted", c.ns, c.limit)
		}
	}
}
