package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// EnsureNamespace creates a namespace (an existing one is fine) and waits until pods can
// be created in it: the controller-manager has made its default ServiceAccount.
func EnsureNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	for {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("namespace %s: its default ServiceAccount never appeared", name), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Namespace annotations read by the apiserver's PodNodeSelector and
// PodTolerationRestriction admission plugins (enabled in the harness's apiserver).
const (
	nodeSelectorAnnotation       = "scheduler.alpha.kubernetes.io/node-selector"
	defaultTolerationsAnnotation = "scheduler.alpha.kubernetes.io/defaultTolerations"
)

// RealNodeNamespace creates the namespace, or annotates an existing one, so that every pod
// created in it afterwards lands on the real node, whoever creates it and whatever its
// spec says (the service sets no node selector or toleration): the apiserver adds the
// node selector realnode=true and a toleration of the realnode NoSchedule taint. It then
// waits until pods can be created in it, like EnsureNamespace.
func RealNodeNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	annotations := map[string]string{
		nodeSelectorAnnotation:       RealNodeLabel + "=true",
		defaultTolerationsAnnotation: `[{"operator":"Exists","effect":"NoSchedule","key":"` + RealNodeLabel + `"}]`,
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return &apierrors.StatusError{ErrStatus: metav1.Status{Reason: metav1.StatusReasonConflict}}
			}
			return err
		}
		if err != nil {
			return err
		}
		if ns.Annotations == nil {
			ns.Annotations = map[string]string{}
		}
		maps.Copy(ns.Annotations, annotations)
		_, err = cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("namespace %s for the real node: %w", name, err)
	}
	return EnsureNamespace(ctx, cs, name)
}
