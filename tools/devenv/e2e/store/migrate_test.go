package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/store"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// oldLeaseRecord makes, with the test's client, container id's record as versions
// before ConfigMap records made it: a Lease named after the id, the record labels, the
// id as holder, and the DELETED owed finalizer when owed.
func oldLeaseRecord(t *testing.T, ns, id, inc string, owed bool) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: container.RecordName(id), Labels: container.RecordLabels(id, inc)},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &id},
	}
	if owed {
		l.Finalizers = []string{container.RecordFinalizer}
	}
	l, err := testenv.Cluster(t).Client.CoordinationV1().Leases(ns).Create(context.Background(), l, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // a Lease left with the finalizer would keep the namespace
		_, _ = testenv.Cluster(t).Client.CoordinationV1().Leases(ns).Patch(context.Background(), l.Name, "application/merge-patch+json",
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	return l
}

// Issue 25: records were Leases, which DCM's Role does not grant; they are ConfigMaps
// now, and a store that starts where an earlier version left Lease records (one owing a
// DELETED, one plain, and a Lease of someone else's) moves them before it serves:
// nothing lost, the records' Leases gone, the other Lease untouched. Two stores start at
// once (two replicas of the new version), and a store started again finds nothing left.
func TestStartMovesLeaseRecordsToConfigMaps(t *testing.T) {
	ns := testenv.Namespace(t)
	cs := testenv.Cluster(t).Client
	oldLeaseRecord(t, ns, "owed", "inc-owed", true)
	oldLeaseRecord(t, ns, "plain", "inc-plain", false)
	other, err := cs.CoordinationV1().Leases(ns).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Labels: map[string]string{"app": "theirs"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	fixtures := []*fixture{newFixtureIn(t, ns), newFixtureIn(t, ns)}
	// Both start at once: their moves run side by side.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, f := range fixtures {
		t.Cleanup(func() { cancel(); f.s.Shutdown() })
		f.s.Start(ctx)
	}
	for i, f := range fixtures {
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		if !f.s.WaitForSync(wctx) {
			t.Fatalf("store %d did not sync", i)
		}
		wcancel()
	}

	for _, f := range fixtures {
		m, ok := f.s.LeaseMove()
		if !ok || !m.Granted || len(m.Left) > 0 || len(m.Foreign) > 0 {
			t.Errorf("LeaseMove = %+v %v", m, ok)
		}
	}
	a, _ := fixtures[0].s.LeaseMove()
	b, _ := fixtures[1].s.LeaseMove()
	if a.Moved+b.Moved < 2 {
		t.Errorf("moved %d + %d, want both records moved (by one store or the other, or both)", a.Moved, b.Moved)
	}
	for _, tc := range []struct {
		id, inc string
		owed    bool
	}{{"owed", "inc-owed", true}, {"plain", "inc-plain", false}} {
		c, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), container.RecordName(tc.id), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: no ConfigMap record: %v", tc.id, err)
			continue
		}
		rec, ok := container.RecordOf(c, tc.id)
		if !ok || rec.Incarnation != tc.inc || rec.Owed != tc.owed || rec.Terminating || c.Labels[container.LabelRecord] != container.RecordValue {
			t.Errorf("%s: moved as %+v %v (labels %v), want incarnation %s owed %v", tc.id, rec, ok, c.Labels, tc.inc, tc.owed)
		}
		// The stores see it as the record, as any record.
		for i, f := range fixtures {
			if snap := f.s.Snapshot(tc.id); snap.Record == nil || snap.Record.UID != c.UID || snap.Record.Owed != tc.owed {
				t.Errorf("%s: store %d's cache shows %+v", tc.id, i, snap.Record)
			}
		}
		if _, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), container.RecordName(tc.id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: the Lease record stayed: %v", tc.id, err)
		}
	}
	if l, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), other.Name, metav1.GetOptions{}); err != nil || l.UID != other.UID {
		t.Errorf("someone else's Lease was touched: %v %v", l, err)
	}

	// Moved already: a move again finds nothing (idempotent), and changes nothing.
	m, err := store.MoveLeaseRecords(context.Background(), cs, ns)
	if err != nil || !m.Granted || m.Moved != 0 {
		t.Errorf("moving again = %+v, %v; want nothing to move", m, err)
	}
	// The owed record is delivered and deleted as any: its finalizer comes off.
	rec := fixtures[0].s.Snapshot("owed").Record
	if err := fixtures[0].s.DeleteRecord(context.Background(), *rec); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the moved owed record gone once delivered", func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), container.RecordName("owed"), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errString("still there")
	})
}

// A Lease record whose ConfigMap was made already (a replica that moved it and died
// before deleting the Lease, or a Role granting Leases to list but not to delete) is
// moved again without harm; when the Lease owes the DELETED and the ConfigMap of the
// same incarnation does not (an old replica marked the Lease after the move), the mark
// is carried over: a DELETED owed is never dropped.
func TestMoveCarriesOverADeletedOwedMark(t *testing.T) {
	ns := testenv.Namespace(t)
	cs := testenv.Cluster(t).Client
	makeRecord(t, ns, "x", "i1", false)
	oldLeaseRecord(t, ns, "x", "i1", true)
	makeRecord(t, ns, "y", "i2", false) // a newer container of y than the Lease's
	oldLeaseRecord(t, ns, "y", "i1", true)
	m, err := store.MoveLeaseRecords(context.Background(), cs, ns)
	if err != nil || m.Moved != 2 {
		t.Fatalf("MoveLeaseRecords = %+v, %v", m, err)
	}
	for id, wantOwed := range map[string]bool{"x": true, "y": false} {
		c, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), container.RecordName(id), metav1.GetOptions{})
		rec, ok := container.RecordOf(c, id)
		if err != nil || !ok || rec.Owed != wantOwed {
			t.Errorf("%s: %+v %v %v, want owed %v", id, rec, ok, err, wantOwed)
		}
		if l, err := cs.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{}); err != nil ||
			slices.ContainsFunc(l.Items, func(l coordinationv1.Lease) bool { return l.Name == container.RecordName(id) }) {
			t.Errorf("%s: the Lease record stayed (%v)", id, err)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
