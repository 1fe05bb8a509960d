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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// The writes to a record after its create: each one request, each guarded by the
// record's UID, so a later record of the same id is never touched.

// Finalize takes RecordFinalizer off a deleted record once its container's DELETED has
// been delivered (status.Cluster), so the apiserver lets the record go. One PATCH.
func (s *Store) Finalize(ctx context.Context, rec container.Record) error {
	return kubeerr.Classify("finalizing the container record", dropFinalizerOf(ctx, s.client, s.namespace, rec.Name, rec.UID))
}

// DeleteRecord deletes the record of a container that is gone or was never made (no
// Deployment joined it: status.plan), and the Services of it the cache shows, as a
// DELETE does. Its finalizer keeps the record until its DELETED is delivered;
// background propagation, so it goes then, whatever the garbage collector is doing
// (one stuck after an apiserver restart never deletes what the record owned).
func (s *Store) DeleteRecord(ctx context.Context, rec container.Record, services []*container.Service) error {
	if err := deleteRecordIfThere(ctx, s.client, s.namespace, rec.Name, rec.UID, metav1.DeletePropagationBackground); err != nil {
		return kubeerr.Classify("deleting the container record", err)
	}
	for _, v := range services {
		if err := s.deleteService(ctx, v.Name, v.UID); err != nil {
			return kubeerr.Classify("deleting the Service of a deleted container", err)
		}
	}
	return nil
}

// DeleteOrphans deletes Deployments and Services no live record owns (status.Cluster),
// each by UID, at once; gone or replaced is success. A Deployment goes with background
// propagation: its pods go with it, whatever its owner is doing.
func (s *Store) DeleteOrphans(ctx context.Context, deps []*container.Deployment, svcs []*container.Service) error {
	errs := make([]error, len(deps)+len(svcs)) // one slot each: no lock
	var wg sync.WaitGroup
	for i, d := range deps {
		wg.Go(func() { errs[i] = s.deleteDeployment(ctx, d.Name, d.UID) })
	}
	for i, v := range svcs {
		wg.Go(func() { errs[len(deps)+i] = s.deleteService(ctx, v.Name, v.UID) })
	}
	wg.Wait()
	return kubeerr.Classify("deleting what no live record owns", errors.Join(errs...))
}

// deleteDeployment deletes Deployment name if it still has UID uid, its pods in the
// background; gone or replaced is success.
func (s *Store) deleteDeployment(ctx context.Context, name string, uid types.UID) error {
	bg := metav1.DeletePropagationBackground
	err := s.client.AppsV1().Deployments(s.namespace).Delete(ctx, name,
		metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !gone(err) {
		return err
	}
	return nil
}

// deleteService deletes Service name if it still has UID uid; gone or replaced is
// success.
func (s *Store) deleteService(ctx context.Context, name string, uid types.UID) error {
	err := s.client.CoreV1().Services(s.namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !gone(err) {
		return err
	}
	return nil
}

// dropFinalizerOf removes RecordFinalizer from record name with UID uid: a strategic
// merge patch that deletes it from the finalizers and states the UID, which the
// apiserver refuses to change (422) when the name is another record's by now. Gone or
// replaced is success.
func dropFinalizerOf(ctx context.Context, client kubernetes.Interface, ns, name string, uid types.UID) error {
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"$deleteFromPrimitiveList/finalizers":[%q]}}`, uid, container.RecordFinalizer)
	_, err := client.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}

// deleteRecordIfThere deletes record name if it still has UID uid, with the given
// propagation; gone or replaced is success.
func deleteRecordIfThere(ctx context.Context, client kubernetes.Interface, ns, name string, uid types.UID, propagation metav1.DeletionPropagation) error {
	if _, err := deleteRecordOf(ctx, client, ns, name, uid, propagation); !gone(err) {
		return err
	}
	return nil
}

// deleteRecordOf deletes a record through the REST client, which, unlike the typed
// Delete, gives back the object the apiserver answers with: a record its finalizers
// keep comes back with its deletion timestamp, for this replica's cache (Store.wrote).
func deleteRecordOf(ctx context.Context, client kubernetes.Interface, ns, name string, uid types.UID, propagation metav1.DeletionPropagation) (*corev1.ConfigMap, error) {
	opts := metav1.DeleteOptions{PropagationPolicy: &propagation, Preconditions: &metav1.Preconditions{UID: &uid}}
	obj, err := client.CoreV1().RESTClient().Delete().Namespace(ns).Resource("configmaps").Name(name).Body(&opts).Do(ctx).Get()
	if err != nil {
		return nil, err
	}
	c, _ := obj.(*corev1.ConfigMap)
	return c, nil
}

// gone: a delete or patch of a record found it gone, or another record by now.
func gone(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsConflict(err) }

// retrying calls fn until it succeeds or ctx ends, waiting from 100 ms, doubling, up to
// 2 s between tries (a wait.Backoff with a Cap stops at the cap); the error is fn's
// last.
func retrying(ctx context.Context, fn func(context.Context) error) error {
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}
