package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Create makes a container in two round trips: its record (which reserves the id),
// then its Deployment and its Service together, both owned by the record. Any failure
// takes the record back (undo), and the garbage collector removes what it owned. What
// the apiserver answered goes into this replica's caches before Create returns (see
// Store.wrote), so a GET that follows on this replica sees the container.
func (s *Store) Create(ctx context.Context, id string, objs container.Objects) (container.Observed, error) {
	obs, err := s.create(ctx, id, objs)
	return obs, s.explainForbidden(ctx, err)
}

func (s *Store) create(ctx context.Context, id string, objs container.Objects) (container.Observed, error) {
	ctx, cancel := context.WithTimeout(ctx, s.CreateTimeout)
	defer cancel()
	began := s.Clock.Now()
	record, err := s.reserve(ctx, id)
	if err != nil {
		return container.Observed{}, err
	}
	if !reservedInTime(began, s.Clock.Now(), s.ReserveWindow) {
		s.undo(record, nil)
		return container.Observed{}, errReservedLate(s.ReserveWindow)
	}
	s.wrote(recordKind, id, record)

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
		var made *corev1.Service
		if svcErr == nil {
			made = svc
		}
		s.undo(record, made)
		if depErr != nil {
			return container.Observed{}, classify("creating Deployment", depErr)
		}
		return container.Observed{}, classify("creating Service", svcErr)
	}
	s.wrote(deploymentKind, id, dep)
	out := container.Objects{Deployment: dep}
	if svc != nil {
		s.wrote(serviceKind, id, svc)
		out.Service = svc
	}
	return out.Observed(), nil
}

// errReservedLate answers a create that did not have its id reserved within the
// reservation window (Store.ReserveWindow): the Kubernetes API was slow, and a DELETE
// of the id may have answered 404 meanwhile; nothing was created.
func errReservedLate(window time.Duration) error {
	return &Error{Kind: KindUnavailable, RetryAfter: 1,
		Message: fmt.Sprintf("reserving the container id took longer than %s (the Kubernetes API is slow); nothing was created; retry", window)}
}

// errTaken answers a create whose id another container holds.
var errTaken = &Error{Kind: KindConflict, Message: "the container id is taken"}

// deletingRetryAfter is the Retry-After (seconds) of a create whose id's previous
// container is being deleted: its DELETED goes out within a debounce and a round trip
// to NATS, unless NATS is away.
const deletingRetryAfter = 5

// errBeingDeleted answers a create whose id's previous container is deleted and whose
// DELETED is not delivered yet.
var errBeingDeleted = &Error{Kind: KindDeleting, RetryAfter: deletingRetryAfter,
	Message: fmt.Sprintf("the previous container with this id is being deleted; nothing was created; retry after %d s", deletingRetryAfter)}

// reserve creates the id's record; when the id has one, claimID decides (one read of
// the record, by name, at the apiserver).
func (s *Store) reserve(ctx context.Context, id string) (*corev1.ConfigMap, error) {
	records := s.client.CoreV1().ConfigMaps(s.namespace)
	retried := false
	for {
		c, err := records.Create(ctx, container.NewRecord(id), metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return c, classify("creating the container record", err)
		}
		f, err := s.readRecord(ctx, id, false)
		switch claimID(f, retried) {
		case claimRetry:
			retried = true
			continue
		case claimDeleting:
			return nil, errBeingDeleted
		case claimFailed:
			return nil, classify("reading the container record", err)
		}
		return nil, errTaken
	}
}

// undo takes back the record of a failed create, detached from the request's context
// (a client that hung up must not leave objects behind): its finalizer off, then the
// record deleted with background propagation, so it goes at once and a retry of the
// create finds the id free; the Service it made (made: nil when none, or its answer
// was lost) is deleted too, and the garbage collector deletes whatever else it owned
// (a Deployment or a Service whose answer was lost). No
// DELETED is owed for it: DCM got no 201; should the status reporter have told DCM of
// its Deployment meanwhile, it sends the DELETED of a container whose record went
// (status.plan). The first try is made before the create answers, within undoTry;
// should it fail (the apiserver is away: often what failed the create), it is tried
// again in the background, with backoff, for up to CreateTimeout, so a failing create
// answers within its request's budget. Should every try fail, the record stays live:
// the status reporter settles a record no Deployment joined.
func (s *Store) undo(record *corev1.ConfigMap, made *corev1.Service) {
	try := func(ctx context.Context) error {
		if err := s.dropFinalizer(ctx, record.Name, record.UID); err != nil {
			return err
		}
		if err := s.deleteRecordObject(ctx, record.Name, record.UID, metav1.DeletePropagationBackground); err != nil {
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
			s.log.Error("undoing a failed create: its record stays, and the status reporter settles it", "record", record.Name, "err", err)
		}
	}()
}

// undoTry bounds undo's first try, made before the create answers.
const undoTry = 5 * time.Second
