package store

import (
	"slices"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// oldLease is a Lease record as versions before ConfigMap records made it.
func oldLease(id, inc string, owed bool, edit ...func(*coordinationv1.Lease)) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: container.RecordName(id), UID: "lease-uid",
		Labels: container.RecordLabels(id, inc)}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &id}}
	if owed {
		l.Finalizers = []string{container.RecordFinalizer}
	}
	for _, e := range edit {
		e(l)
	}
	return l
}

// What a Lease record becomes: its labels (the record marker added) and its DELETED owed.
func TestMoveTarget(t *testing.T) {
	now := metav1.Now()
	deleting := func(l *coordinationv1.Lease) { l.DeletionTimestamp = &now }
	bare := func(l *coordinationv1.Lease) { // no record marker, plus a label of someone's
		l.Labels = map[string]string{container.LabelManagedBy: container.ManagedByValue, container.LabelInstanceID: "web",
			container.LabelIncarnation: "i1", "team": "a"}
	}
	for _, tc := range []struct {
		name   string
		lease  *coordinationv1.Lease
		none   bool
		owed   bool
		labels map[string]string
	}{
		{"a plain record", oldLease("web", "i1", false), false, false, container.RecordLabels("web", "i1")},
		{"owed", oldLease("web", "i1", true), false, true, container.RecordLabels("web", "i1")},
		{"owed, being deleted by hand: kept, owed", oldLease("web", "i1", true, deleting), false, true, container.RecordLabels("web", "i1")},
		{"being deleted, owing nothing: going anyway, not moved", oldLease("web", "i1", false, deleting), true, false, nil},
		{"no record label: added, other labels kept", oldLease("web", "i1", false, bare), false, false,
			func() map[string]string { l := container.RecordLabels("web", "i1"); l["team"] = "a"; return l }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, ok := container.RecordOf(tc.lease, "web")
			if !ok {
				t.Fatal("not a record")
			}
			got := moveTarget(tc.lease, rec, "web")
			if tc.none {
				if got != nil {
					t.Errorf("moved: %+v", got)
				}
				return
			}
			if got == nil {
				t.Fatal("not moved")
			}
			if got.Name != tc.lease.Name || !equalMaps(got.Labels, tc.labels) {
				t.Errorf("moved to %s %v, want %s %v", got.Name, got.Labels, tc.lease.Name, tc.labels)
			}
			if slices.Contains(got.Finalizers, container.RecordFinalizer) != tc.owed || len(got.Finalizers) > 1 {
				t.Errorf("finalizers %v, owed %v", got.Finalizers, tc.owed)
			}
			back, ok := container.RecordOf(got, "web")
			if !ok || back.Incarnation != rec.Incarnation || back.Owed != tc.owed {
				t.Errorf("reads back as %+v %v", back, ok)
			}
		})
	}
}

// What the move writes to a ConfigMap record it found already made (by another replica,
// or by this one before a restart).
func TestMovedRecordWrite(t *testing.T) {
	now := metav1.Now()
	cm := func(inc string, owed bool, edit ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
		c := container.NewRecord("web", inc, owed)
		for _, e := range edit {
			e(c)
		}
		return c
	}
	lease := func(inc string, owed bool) container.Record {
		r, _ := container.RecordOf(oldLease("web", inc, owed), "web")
		return r
	}
	for _, tc := range []struct {
		name      string
		cur       *corev1.ConfigMap
		lease     container.Record
		foreign   bool
		writeOwed bool
	}{
		{"already moved, same state", cm("i1", false), lease("i1", false), false, false},
		{"already moved, owed on both", cm("i1", true), lease("i1", true), false, false},
		{"the Lease owes, the ConfigMap not yet: marked owed", cm("i1", false), lease("i1", true), false, true},
		{"the ConfigMap owes, the Lease not: left owed", cm("i1", true), lease("i1", false), false, false},
		{"another incarnation (a newer container of the id): left alone", cm("i2", false), lease("i1", true), false, false},
		{"the ConfigMap being deleted: left alone", cm("i1", false, func(c *corev1.ConfigMap) { c.DeletionTimestamp = &now }), lease("i1", true), false, false},
		{"someone else's ConfigMap with the name: foreign, never touched",
			cm("i1", false, func(c *corev1.ConfigMap) { c.Labels = map[string]string{"app": "theirs"} }), lease("i1", true), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cur.DeepCopy()
			w, foreign := movedRecordWrite(tc.cur, tc.lease, "web")
			if foreign != tc.foreign || (w != nil) != tc.writeOwed {
				t.Fatalf("write %v foreign %v, want write %v foreign %v", w != nil, foreign, tc.writeOwed, tc.foreign)
			}
			if w != nil && !slices.Contains(w.Finalizers, container.RecordFinalizer) {
				t.Errorf("written without the finalizer: %v", w.Finalizers)
			}
			if !equalMaps(tc.cur.Labels, before.Labels) || !slices.Equal(tc.cur.Finalizers, before.Finalizers) {
				t.Error("the ConfigMap read was changed")
			}
		})
	}
}

// The Lease's finalizer comes off only on the Lease listed (same UID), and only ours.
func TestReleaseWriteOfALease(t *testing.T) {
	withUID := func(uid types.UID, fin ...string) *coordinationv1.Lease {
		l := oldLease("web", "i1", false)
		l.UID, l.Finalizers = uid, fin
		return l
	}
	for _, tc := range []struct {
		name string
		cur  *coordinationv1.Lease
		want []string // the finalizers written; nil: nothing written
	}{
		{"owed: finalizer off", withUID("u1", container.RecordFinalizer), []string{}},
		{"owed and someone's finalizer: only ours off", withUID("u1", "example.com/keep", container.RecordFinalizer), []string{"example.com/keep"}},
		{"no finalizer: nothing", withUID("u1"), nil},
		{"another Lease by now: untouched", withUID("u2", container.RecordFinalizer), nil},
		{"gone", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := releaseWrite(tc.cur, "u1")
			if (w == nil) != (tc.want == nil) || (w != nil && !slices.Equal(w.Finalizers, tc.want)) {
				t.Errorf("wrote %+v, want finalizers %v", w, tc.want)
			}
		})
	}
}

func TestLeaseMoveString(t *testing.T) {
	for _, tc := range []struct {
		m    LeaseMove
		want string
	}{
		{LeaseMove{}, "not granted (nothing to migrate)"},
		{LeaseMove{Granted: true}, "granted, moved 0 Lease records"},
		{LeaseMove{Granted: true, Moved: 3, Left: []string{"a"}}, "granted, moved 3 Lease records, 1 Leases left (no right to delete them)"},
		{LeaseMove{Granted: true, Moved: 1, Foreign: []string{"b"}}, "granted, moved 1 Lease records, 1 not moved (a ConfigMap of someone else has the record's name)"},
	} {
		if got := tc.m.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.m, got, tc.want)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
