package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
)

// Building a container's objects with container.Build and encoding them costs ~0.4 ms:
// a minute of CPU for 150,000 containers, taken from the two or so the service under
// measurement has. So each kind's JSON is built once, for a reference container, and
// cut where a value that differs between containers stands (its id, names, uids,
// resourceVersion, addresses); an object is then the pieces with container i's values in
// between, byte for byte what encoding Build(i) gives (newEncoder checks a few, and
// the tests many). The protobuf watch event that adds an object is cut the same way;
// protobuf writes each field's length before it, so every varying value has the same
// length for every container (ids, uids and names are fixed-width, resourceVersions ten
// digits, addresses three digits a part).

// varying is what differs between containers, in a fixed order: the i-th value of
// varying(i, k) stands where the reference container's i-th value stood.
func varying(base int64, i int, k Kind) []string {
	return []string{ID(i), uid(i, 4), uid(i, 0), uid(i, 1), uid(i, 2), uid(i, 3), uid(i, 5),
		PodName(i), DeploymentName(i), templateHash(i), resourceVersion(base, i, k),
		clusterIP(i), podIP(i), hostIP(i), nodeName(i), containerID(i)}
}

// reference is the container the templates are cut from: any whose values occur nowhere
// else in its objects (newEncoder checks the result).
const reference = 123457

// template is one kind's JSON cut at the varying values: lit[0] val[0] lit[1] ... lit[n].
type template struct {
	kind Kind
	lit  [][]byte
	val  []int // index into varying
}

// cut makes the template of raw, the reference container's object of kind k.
func cut(raw []byte, vals []string) template {
	order := make([]int, len(vals))
	for n := range order {
		order[n] = n
	}
	// Longest first: a pod's name holds its Deployment's, a record's name its id.
	sort.SliceStable(order, func(a, b int) bool { return len(vals[order[a]]) > len(vals[order[b]]) })
	var t template
	start := 0
	for pos := 0; pos < len(raw); {
		found := -1
		for _, n := range order {
			if bytes.HasPrefix(raw[pos:], []byte(vals[n])) {
				found = n
				break
			}
		}
		if found < 0 {
			pos++
			continue
		}
		t.lit = append(t.lit, raw[start:pos])
		t.val = append(t.val, found)
		pos += len(vals[found])
		start = pos
	}
	t.lit = append(t.lit, raw[start:])
	return t
}

// append adds container i's object to dst.
func (t *template) append(dst []byte, vals []string) []byte {
	for n, v := range t.val {
		dst = append(dst, t.lit[n]...)
		dst = append(dst, vals[v]...)
	}
	return append(dst, t.lit[len(t.lit)-1]...)
}

// encoder writes the JSON of any container's objects, and the protobuf frame of the
// watch event that adds one, from the templates.
type encoder struct {
	namespace string
	created   metav1.Time
	base      int64
	kinds     [4]template
	added     [4]template // protobuf ADDED events (pbEvent)
}

// newEncoder cuts the templates and checks them against Build for a few containers.
func newEncoder(namespace string, created metav1.Time, base int64) (*encoder, error) {
	e := &encoder{namespace: namespace, created: created, base: base}
	c, err := Build(namespace, reference, created, base)
	if err != nil {
		return nil, err
	}
	for _, k := range Kinds {
		raw, err := json.Marshal(c.Object(k))
		if err != nil {
			return nil, err
		}
		e.kinds[k] = cut(raw, varying(base, reference, k))
		e.kinds[k].kind = k
		frame, err := pbEvent(watch.Added, c.Object(k).(runtime.Object))
		if err != nil {
			return nil, err
		}
		e.added[k] = cut(frame, varying(base, reference, k))
		e.added[k].kind = k
	}
	for _, i := range []int{0, 1, 49, 1000, 65535, 99999, 149999} {
		if err := e.check(i); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// check compares container i's objects from the templates with Build's.
func (e *encoder) check(i int) error {
	c, err := Build(e.namespace, i, e.created, e.base)
	if err != nil {
		return err
	}
	for _, k := range Kinds {
		want, err := json.Marshal(c.Object(k))
		if err != nil {
			return err
		}
		if got := e.append(nil, i, k); !bytes.Equal(got, want) {
			return fmt.Errorf("the %s template gives container %d as\n%s\nnot as Build does:\n%s", k, i, got, want)
		}
		want, err = pbEvent(watch.Added, c.Object(k).(runtime.Object))
		if err != nil {
			return err
		}
		if got := e.appendAdded(nil, i, k); !bytes.Equal(got, want) {
			return fmt.Errorf("the %s protobuf template gives container %d as\n%q\nnot as Build does:\n%q", k, i, got, want)
		}
	}
	return nil
}

// appendAdded adds the protobuf frame of the watch event that adds container i's object
// of kind k to dst.
func (e *encoder) appendAdded(dst []byte, i int, k Kind) []byte {
	return e.added[k].append(dst, varying(e.base, i, k))
}

// pbSerializer encodes an object as the apiserver does for a client that asks for
// protobuf (client-go's generated clients do, by default): the "k8s\x00" prefix, then a
// runtime.Unknown holding its apiVersion, kind and protobuf bytes.
var pbSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// pbEvent is one watch event as the apiserver streams it in protobuf: a 4-byte
// big-endian length, then the metav1.WatchEvent holding obj's protobuf encoding.
func pbEvent(typ watch.EventType, obj runtime.Object) ([]byte, error) {
	var raw bytes.Buffer
	if err := pbSerializer.Encode(obj, &raw); err != nil {
		return nil, err
	}
	ev := metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw.Bytes()}}
	b, err := ev.Marshal()
	if err != nil {
		return nil, err
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...), nil
}

// append adds the JSON of container i's object of kind k to dst.
func (e *encoder) append(dst []byte, i int, k Kind) []byte {
	return e.kinds[k].append(dst, varying(e.base, i, k))
}
