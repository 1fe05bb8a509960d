package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// Create makes a container: its record, which reserves the id, then its Deployment and
// Service, owned by the record. A failure takes the record back (undo). The answers go
// into this replica's cache (Store.wrote), so a GET that follows here sees the container.
func (s *Store) Create(ctx context.Context, id string, objs container.Objects) (container.Observed, error) {
	obs, err := s.create(ctx, id, objs)
	return obs, s.explainForbidden(ctx, err)
}

func (s *Store) create(ctx context.Context, id string, objs container.Objects) (container.Observed, error) {
	ctx, cancel := context.WithTimeout(ctx, s.CreateTimeout)
	defer cancel()
	var record *corev1.ConfigMap
	var began time.Time
	for try := 1; ; try++ {
		began = s.Clock.Now()
		var err error
		record, err = s.reserve(ctx, id, objs.Request)
		var same *sameRequest
		if !errors.As(err, &same) {
			if err != nil {
				return container.Observed{}, err
			}
			break
		}
		obs, err := s.replay(ctx, id, same.rec, objs)
		if !errors.Is(err, errTakenBack) || try == maxReplays {
			return obs, err
		}
		// The first attempt failed and took its record back: this one makes it.
	}
	if !reservedInTime(began, s.Clock.Now(), s.ReserveWindow) {
		s.undo(record, nil)
		return container.Observed{}, errReservedLate(s.ReserveWindow)
	}
	s.wrote(record)

	objs = objs.OwnedBy(record.Name, record.UID)
	dep, svc := objs.Deployment, objs.Service
	dep.Namespace = s.namespace
	var depErr, svcErr error
	var wg sync.WaitGroup
	if svc != nil {
		svc.Namespace = s.namespace
		wg.Go(func() { svc, svcErr = s.client.CoreV1().Services(s.namespace).Create(ctx, svc, metav1.CreateOptions{}) })
	}
	dep, depErr = s.client.AppsV1().Deployments(s.namespace).Create(ctx, dep, metav1.CreateOptions{})
	wg.Wait()
	if depErr != nil || svcErr != nil {
		if objs.Request.Key != "" && undecided(depErr) && undecided(svcErr) {
			// The outcome is unknown, and a keyed retry may be waiting on another replica:
			// taking the record back could answer it with a container that then goes.
			// The retry replays, or the status controller settles the record.
			return container.Observed{}, errHalfMade
		}
		var made *corev1.Service
		if svcErr == nil {
			made = svc
		}
		s.undo(record, made)
		if depErr != nil {
			return container.Observed{}, kubeerr.Classify("creating Deployment", depErr)
		}
		return container.Observed{}, kubeerr.Classify("creating Service", svcErr)
	}
	s.wrote(dep)
	out := container.Objects{Deployment: dep}
	if svc != nil {
		s.wrote(svc)
		out.Service = svc
	}
	return out.Observed(), nil
}

// errReservedLate answers a create not reserved within Store.ReserveWindow: a DELETE of
// the id may have answered 404 meanwhile, so nothing is created.
func errReservedLate(window time.Duration) error {
	return &kubeerr.Error{Kind: kubeerr.KindUnavailable, RetryAfter: 1,
		Message: fmt.Sprintf("reserving the container id took longer than %s (the Kubernetes API is slow); nothing was created; retry", window)}
}

// errTaken answers a create whose id another container holds.
var errTaken = &kubeerr.Error{Kind: kubeerr.KindConflict, Message: "the container id is taken"}

// deletingRetryAfter is the Retry-After (seconds) of a create whose id's previous
// container is being deleted: its DELETED goes out soon, unless NATS is away.
const deletingRetryAfter = 5

// errBeingDeleted answers a create while the id's previous container awaits its DELETED.
var errBeingDeleted = &kubeerr.Error{Kind: kubeerr.KindDeleting, RetryAfter: deletingRetryAfter,
	Message: fmt.Sprintf("the previous container with this id is being deleted; nothing was created; retry after %d s", deletingRetryAfter)}

// reserve creates the id's record, keeping req on it. When the id has one, claimID decides
// from one read of it; the same request again is a *sameRequest.
func (s *Store) reserve(ctx context.Context, id string, req container.Request) (*corev1.ConfigMap, error) {
	records := s.client.CoreV1().ConfigMaps(s.namespace)
	retried := false
	for {
		c, err := records.Create(ctx, container.NewRecord(id, req), metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return c, kubeerr.Classify("creating the container record", err)
		}
		f, err := s.readRecord(ctx, id, false)
		switch claimID(f, retried, req) {
		case claimRetry:
			retried = true
			continue
		case claimDeleting:
			return nil, errBeingDeleted
		case claimFailed:
			return nil, kubeerr.Classify("reading the container record", err)
		case claimSame:
			return nil, &sameRequest{rec: f.Rec}
		case claimKeyReused:
			return nil, errKeyReused(req.Key, id)
		case claimSameDeleting:
			return nil, errSameBeingDeleted
		}
		return nil, errTaken
	}
}

// sameRequest: the record was made by this request, sent before with the same key and spec.
type sameRequest struct{ rec container.Record }

func (*sameRequest) Error() string { return "the same request again" }

// maxReplays bounds how often a create finds the earlier attempt taken back and retries.
const maxReplays = 3

// errTakenBack: the attempt a replay waited for took its record back. A 503 once
// maxReplays creates have met it, since a client that retries 5xx tries again.
var errTakenBack = &kubeerr.Error{Kind: kubeerr.KindUnavailable, RetryAfter: 1,
	Message: "earlier attempts with this Idempotency-Key failed meanwhile; nothing was created; retry"}

// replay answers a create sent again with its Idempotency-Key: with the container the
// first attempt (record rec) made, once this replica's cache shows it; errTakenBack when
// that record was taken back or replaced, so the caller reserves again. A missing Service
// is awaited while the first attempt may be in flight (CreateTimeout), then made here.
func (s *Store) replay(ctx context.Context, id string, rec container.Record, objs container.Objects) (container.Observed, error) {
	var o container.Observed
	var seen, takenBack, serviceMissing bool
	err := waitCached(ctx, func() bool {
		snap := s.Snapshot(id)
		if obs, ok := snap.Observed(); ok && obs.Deployment.Incarnation == string(rec.UID) {
			o = obs
			if obs.Service != nil || objs.Service == nil {
				return true
			}
			if serviceMissing = s.Clock.Since(rec.Created) > s.CreateTimeout; serviceMissing {
				return true
			}
		}
		switch r := snap.Record; {
		case r != nil && (r.UID != rec.UID || r.Terminating), r == nil && seen:
			takenBack = true
		case r != nil:
			seen = true
		}
		return takenBack
	})
	switch {
	case err != nil:
		return container.Observed{}, errStillInFlight
	case takenBack:
		return container.Observed{}, errTakenBack
	case serviceMissing:
		return s.completeService(ctx, id, rec, objs, o)
	}
	return o, nil
}

// completeService makes the missing Service of a half-made container (errHalfMade).
func (s *Store) completeService(ctx context.Context, id string, rec container.Record, objs container.Objects, o container.Observed) (container.Observed, error) {
	svc := objs.OwnedBy(rec.Name, rec.UID).Service
	svc.Namespace = s.namespace
	made, err := s.client.CoreV1().Services(s.namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return container.Observed{}, kubeerr.Classify("creating the Service of a half-made container", err)
	}
	s.wrote(made)
	v := container.ServiceOf(made)
	o.Service = &v
	return o, nil
}

// undecided: a create succeeded (nil), or its outcome is unknown (timeout, overload).
func undecided(err error) bool {
	var se *kubeerr.Error
	return err == nil || (errors.As(kubeerr.Classify("", err), &se) && se.Kind == kubeerr.KindUnavailable)
}

// errHalfMade answers a keyed create whose object creates got no answer: the record stays.
var errHalfMade = &kubeerr.Error{Kind: kubeerr.KindUnavailable, RetryAfter: 1,
	Message: "the Kubernetes API did not answer while the container was being made; retry with the same Idempotency-Key"}

// errKeyReused answers a create that reuses an Idempotency-Key with another spec.
func errKeyReused(key, id string) error {
	return &kubeerr.Error{Kind: kubeerr.KindKeyReused, Message: fmt.Sprintf("Idempotency-Key %q was used by a create with another spec (container %s); nothing was changed: a new request needs a new key", key, id)}
}

// errStillInFlight answers a replay before this replica's cache shows the container.
var errStillInFlight = &kubeerr.Error{Kind: kubeerr.KindUnavailable, RetryAfter: 1,
	Message: "the first request with this Idempotency-Key is still in progress; retry"}

// errSameBeingDeleted answers a replay whose container is being deleted: a 503, so a
// client that retries 5xx makes it again once the id is free.
var errSameBeingDeleted = &kubeerr.Error{Kind: kubeerr.KindUnavailable, RetryAfter: deletingRetryAfter,
	Message: fmt.Sprintf("the container this Idempotency-Key made is being deleted; retry after %d s", deletingRetryAfter)}

// undo takes back a failed create's record (finalizer off, then deleted) and the Service
// made (nil if none), so a retry finds the id free at once; the garbage collector deletes
// the rest. It ignores the request's context, so a client that hung up leaves nothing, and
// retries in the background after one try within undoTry; the status controller settles
// what it leaves. No DELETED is owed unless the status controller reported the Deployment.
func (s *Store) undo(record *corev1.ConfigMap, made *corev1.Service) {
	try := func(ctx context.Context) error {
		if err := dropFinalizerOf(ctx, s.client, s.namespace, record.Name, record.UID); err != nil {
			return err
		}
		if err := deleteRecordIfThere(ctx, s.client, s.namespace, record.Name, record.UID, metav1.DeletePropagationBackground); err != nil {
			return err
		}
		if made != nil {
			return s.deleteService(ctx, made.Name, made.UID)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), undoTry)
	err := try(ctx)
	cancel()
	if err == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.CreateTimeout)
		defer cancel()
		if err := retrying(ctx, try); err != nil {
			s.log.Error("undoing a failed create: its record stays, and the status controller settles it", "record", record.Name, "err", err)
		}
	}()
}

// undoTry bounds undo's first try, made before the create answers.
const undoTry = 5 * time.Second
