package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Permission is one thing the service does in its namespace.
type Permission struct{ Verb, Group, Resource string }

func (p Permission) String() string {
	if p.Group == "" {
		return p.Verb + " " + p.Resource
	}
	return p.Verb + " " + p.Group + "/" + p.Resource
}

// Required is every verb and resource the service uses (deploy/base/role.yaml grants
// these: TestRoleGrantsExactlyRequired). A deployment that lacks one is told so at
// start, not through failing requests. Deployments, Services and Pods are read with list
// and watch (the informers, and the status reporter's label-selected list of an id's
// Deployments before it deletes a record no Deployment joined), never with get, and
// never changed in place; a DELETE deletes them. Records and the leader
// election's lock are ConfigMaps: a record is read by name, patched (its finalizer off)
// and deleted; the lock is updated. All of it is within what DCM's own Helm chart
// grants its providers (no Leases, no configmaps/finalizers there).
var Required = slices.Concat(
	grant("apps", "deployments", "list", "watch", "create", "delete"),
	grant("", "services", "list", "watch", "create", "delete"),
	grant("", "pods", "list", "watch"),
	grant("", "configmaps", "get", "list", "watch", "create", "update", "patch", "delete"),
)

func grant(group, resource string, verbs ...string) []Permission {
	out := make([]Permission, len(verbs))
	for i, v := range verbs {
		out[i] = Permission{Verb: v, Group: group, Resource: resource}
	}
	return out
}

// access remembers what the last check found missing, and when it asked.
type access struct {
	mu      sync.Mutex
	missing []Permission
	checked time.Time // zero: never
}

// explainEvery bounds how often a refused write asks the apiserver what is missing
// (explainForbidden): a check is one SelfSubjectAccessReview per permission (17), and a
// client retrying a refused create must not turn each retry into 16 more calls. Within
// it, the last check's answer explains the refusal.
const explainEvery = 30 * time.Second

// CheckPermissions asks the apiserver (one SelfSubjectAccessReview per permission, in
// parallel) which of Required this identity may not do in the namespace, remembers the
// answer for MissingPermissions, and returns it.
func (s *Store) CheckPermissions(ctx context.Context) ([]Permission, error) {
	type answer struct {
		p       Permission
		allowed bool
		err     error
	}
	answers := make(chan answer, len(Required))
	for _, p := range Required {
		go func() {
			r, err := s.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: s.namespace, Verb: p.Verb, Group: p.Group, Resource: p.Resource,
				}},
			}, metav1.CreateOptions{})
			answers <- answer{p: p, allowed: err == nil && r.Status.Allowed, err: err}
		}()
	}
	var missing []Permission
	var firstErr error
	for range Required {
		a := <-answers
		switch {
		case a.err != nil && firstErr == nil:
			firstErr = a.err
		case a.err == nil && !a.allowed:
			missing = append(missing, a.p)
		}
	}
	if firstErr != nil {
		return nil, classify("checking permissions", firstErr)
	}
	sortPermissions(missing)
	s.access.mu.Lock()
	s.access.missing, s.access.checked = missing, s.Clock.Now()
	s.access.mu.Unlock()
	return missing, nil
}

// MissingPermissions is what the last check found missing (nil before the first).
func (s *Store) MissingPermissions() []Permission {
	s.access.mu.Lock()
	defer s.access.mu.Unlock()
	return s.access.missing
}

// Names lists permissions as "verb group/resource", for logs.
func Names(ps []Permission) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.String()
	}
	return names
}

// DescribeMissing says, in one line, what is missing and how to fix it.
func (s *Store) DescribeMissing(missing []Permission) string {
	return fmt.Sprintf("the provider may not %s in namespace %s (grant them with the Role in deploy/base/role.yaml)",
		strings.Join(Names(missing), ", "), s.namespace)
}

// explainForbidden turns an RBAC refusal of a write into an error naming what is
// missing, asking the apiserver again (the Role may have changed since start) at most
// once per explainEvery; within it, the last check's answer is used. The check is
// bounded and detached from a request that may have timed out.
func (s *Store) explainForbidden(ctx context.Context, err error) error {
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindPermission {
		return err
	}
	if missing, ok := s.recentCheck(); ok {
		if len(missing) > 0 {
			se.Message = s.DescribeMissing(missing)
		}
		return se
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	missing, cerr := s.CheckPermissions(ctx)
	if cerr == nil && len(missing) > 0 {
		se.Message = s.DescribeMissing(missing)
	}
	return se
}

// recentCheck is the last check's answer when it is younger than explainEvery. A check
// is claimed before it is made: while one is asking, the others take the previous
// answer (or none) rather than asking too.
func (s *Store) recentCheck() ([]Permission, bool) {
	s.access.mu.Lock()
	defer s.access.mu.Unlock()
	now := s.Clock.Now()
	if !checkDue(s.access.checked, now) {
		return s.access.missing, true
	}
	s.access.checked = now // claimed; CheckPermissions sets it again when done
	return nil, false
}

// checkDue decides whether a refusal asks the apiserver again: no check was made yet
// (checked zero), or the last one is explainEvery old.
func checkDue(checked, now time.Time) bool {
	return checked.IsZero() || now.Sub(checked) >= explainEvery
}

// sortPermissions puts permissions in Required's order, so messages are stable.
func sortPermissions(ps []Permission) {
	slices.SortFunc(ps, func(a, b Permission) int { return slices.Index(Required, a) - slices.Index(Required, b) })
}
