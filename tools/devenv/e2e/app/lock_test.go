package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/dcm-project/k8s-container-sp/internal/election"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// election.ConfigMapLock against the real control plane: what client-go's leader
// election asks of a lock (Get, Create, Update guarded by the resourceVersion read),
// then client-go's election driving two of them: one leader, and the other takes over
// at once when it resigns.
func TestConfigMapLock(t *testing.T) {
	ns := testenv.Namespace(t)
	cs := testenv.Cluster(t).Client
	ctx := context.Background()
	lock := func(id string) *election.ConfigMapLock {
		return &election.ConfigMapLock{Namespace: ns, Name: "sp-status", Client: cs.CoreV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id}}
	}
	a, b := lock("a"), lock("b")
	if _, _, err := a.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get before any Create: %v, want NotFound", err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	rec := resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 12, AcquireTime: now, RenewTime: now}
	if err := a.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "b"}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a second Create: %v, want AlreadyExists", err)
	}
	got, raw, err := b.Get(ctx)
	if err != nil || got.HolderIdentity != "a" || got.LeaseDurationSeconds != 12 || !got.RenewTime.Equal(&now) {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	var fromRaw resourcelock.LeaderElectionRecord
	if err := json.Unmarshal(raw, &fromRaw); err != nil || fromRaw.HolderIdentity != "a" {
		t.Errorf("raw record %s: %v", raw, err)
	}
	// a renews; b writes over what it read before that: refused.
	rec.RenewTime = metav1.NewTime(now.Add(2 * time.Second))
	if err := a.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "b"}); !apierrors.IsConflict(err) {
		t.Errorf("an Update over a stale read: %v, want Conflict", err)
	}
	if _, _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "b"}); err != nil {
		t.Errorf("an Update after a fresh read: %v", err)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "sp-status", metav1.GetOptions{})
	if err != nil || len(cm.Labels) != 0 || len(cm.Data) != 0 || cm.Annotations[resourcelock.LeaderElectionRecordAnnotationKey] == "" {
		t.Errorf("the lock ConfigMap (no labels, no data, the record annotated): %+v %v", cm, err)
	}
	if a.Describe() != ns+"/sp-status" || a.Identity() != "a" {
		t.Errorf("Describe %q Identity %q", a.Describe(), a.Identity())
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "sp-status", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// client-go's election over two locks (short timings).
	var leading [2]atomic.Bool
	cancels := [2]context.CancelFunc{}
	done := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	for i, id := range []string{"a", "b"} {
		ectx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		t.Cleanup(cancel)
		go func() {
			defer close(done[i])
			leaderelection.RunOrDie(ectx, leaderelection.LeaderElectionConfig{
				Lock: lock(id), LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
				ReleaseOnCancel: true, Name: "test",
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(context.Context) { leading[i].Store(true) },
					OnStoppedLeading: func() { leading[i].Store(false) },
				},
			})
		}()
	}
	leader := -1
	testenv.Eventually(t, 10*time.Second, "one leader", func() error {
		switch a, b := leading[0].Load(), leading[1].Load(); {
		case a && !b:
			leader = 0
		case b && !a:
			leader = 1
		default:
			return fmt.Errorf("leading: a=%v b=%v", a, b)
		}
		return nil
	})
	for range 5 { // and only one, across renewals
		time.Sleep(300 * time.Millisecond)
		if leading[0].Load() == leading[1].Load() {
			t.Fatalf("leading: a=%v b=%v", leading[0].Load(), leading[1].Load())
		}
	}
	resigned := time.Now()
	cancels[leader]()
	<-done[leader]
	testenv.Eventually(t, 2*time.Second, "the other takes over once the leader resigned", func() error {
		if !leading[1-leader].Load() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	t.Logf("take-over after a resignation: %s", time.Since(resigned).Round(time.Millisecond))
}
