package bench

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// podWatch is the burst's control: a raw client-go watch of the service's pods, as any
// controller of the cluster would hold one, noting when each container's pod is first
// seen with the Ready condition written. From the write to that moment is what the
// apiserver (and the machine it shares) takes to deliver a change to a watcher; only
// the rest of the time to the event is the service's.
type podWatch struct {
	firstSeen // container id → its pod first seen with the new Ready
	done      chan struct{}
	// restarts counts the watches made (1: never closed early); read by the report
	// only after done.
	restarts int
}

// watchReady starts a watch of ns's containers' pods from now (not from their current
// state: that would send every pod of the namespace first) and notes, for the
// containers in ids, when their pod is first seen with Ready == ready. The apiserver
// closes a watch whose reader falls behind (a busy benchmark process, at 10,000
// containers); the watch is then started again from the last version it delivered, as
// an informer's reflector does.
func (e *Env) watchReady(ctx context.Context, ns string, ids map[string]bool, ready bool) (*podWatch, func(), error) {
	l, err := e.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: container.Selector, Limit: 1})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pw := &podWatch{done: make(chan struct{})}
	rv := l.ResourceVersion
	go func() {
		defer close(pw.done)
		for ctx.Err() == nil {
			w, err := e.Admin.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: container.Selector,
				ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			pw.restarts++
			var gone bool
			if rv, gone = pw.read(w, ids, ready, rv); gone {
				// The version is gone: go on from now (changes between are not seen,
				// and the control counts fewer containers).
				if l, err := e.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: container.Selector, Limit: 1}); err == nil {
					rv = l.ResourceVersion
				}
			}
		}
	}()
	return pw, func() { cancel(); <-pw.done }, nil
}

// read takes one watch's events until it ends and returns the last version seen;
// gone: the watch ended on an error (its version too old to watch from).
func (pw *podWatch) read(w watch.Interface, ids map[string]bool, ready bool, rv string) (last string, gone bool) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		now := time.Now()
		if ev.Type == watch.Error {
			return rv, true
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		rv = p.ResourceVersion
		if ev.Type == watch.Bookmark || podReady(p) != ready {
			continue
		}
		if id := container.InstanceID(p.Labels); ids[id] {
			pw.note(id, now)
		}
	}
	return rv, false
}
