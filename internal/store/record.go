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

// Later writes to a record: one request each, guarded by its UID against a newer record.

// Finalize takes RecordFinalizer off a deleted record once its DELETED is delivered.
func (s *Store) Finalize(ctx context.Context, rec container.Record) error {
	return kubeerr.Classify("finalizing the container record", dropFinalizerOf(ctx, s.client, s.namespace, rec.Name, rec.UID))
}

// DeleteRecord deletes the record of a container gone or never made, and its cached
// Services. Background propagation, so the record goes once its DELETED is delivered,
// even if the garbage collector is stuck after an apiserver restart.
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

// DeleteOrphans deletes, concurrently and by UID, Deployments and Services no live record
// owns; gone or replaced is success.
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

// deleteDeployment deletes Deployment name if its UID is uid, its pods in the background,
// whatever its owner is doing; gone or replaced is success.
func (s *Store) deleteDeployment(ctx context.Context, name string, uid types.UID) error {
	bg := metav1.DeletePropagationBackground
	err := s.client.AppsV1().Deployments(s.namespace).Delete(ctx, name,
		metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !gone(err) {
		return err
	}
	return nil
}

// deleteService deletes Service name if its UID is uid; gone or replaced is success.
func (s *Store) deleteService(ctx context.Context, name string, uid types.UID) error {
	err := s.client.CoreV1().Services(s.namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !gone(err) {
		return err
	}
	return nil
}

// dropFinalizerOf removes RecordFinalizer from record name by a patch stating uid, which
// the apiserver refuses to change (422) on a newer record. Gone or replaced is success.
func dropFinalizerOf(ctx context.Context, client kubernetes.Interface, ns, name string, uid types.UID) error {
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"$deleteFromPrimitiveList/finalizers":[%q]}}`, uid, container.RecordFinalizer)
	_, err := client.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}

// deleteRecordIfThere deletes record name if its UID is uid; gone or replaced is success.
func deleteRecordIfThere(ctx context.Context, client kubernetes.Interface, ns, name string, uid types.UID, propagation metav1.DeletionPropagation) error {
	if _, err := deleteRecordOf(ctx, client, ns, name, uid, propagation); !gone(err) {
		return err
	}
	return nil
}

// deleteRecordOf deletes through the REST client since, unlike the typed Delete, it returns
// the answer: a record its finalizer keeps, with its deletion timestamp, for Store.wrote.
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

// retrying calls fn until it succeeds or ctx ends, with capped doubling backoff (a
// wait.Backoff with a Cap would stop at the cap); the error is fn's last.
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
