// Package access knows the Kubernetes permissions the service uses in its namespace
// (Required, which deploy/base/role.yaml grants) and asks the apiserver which of them
// its identity lacks: at start, regularly, and when a write is refused (Explain), so a
// Role that lacks one is named in a log line, in health and in the refusal's problem,
// not found out through failing requests.
package access

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
// these: TestRoleGrantsExactlyRequired). Deployments, Services and Pods are read with
// list and watch (the informers, and the status controller's label-selected list of an
// id's Deployments before it deletes a record no Deployment joined), never with get; a
// DELETE deletes them. A Deployment held for its image is patched once it resolves. Records and the leader election's lock
// are ConfigMaps: a record is read by name, patched (its finalizer off) and deleted; the
// lock is updated. All of it is within what DCM's own Helm chart grants its providers
// (no Leases, no configmaps/finalizers there).
var Required = slices.Concat(
	grant("apps", "deployments", "list", "watch", "create", "patch", "delete"),
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

// Checker asks the apiserver what this identity may not do in its namespace, and
// remembers the last answer.
type Checker struct {
	client    kubernetes.Interface
	namespace string
	now       func() time.Time

	mu      sync.Mutex
	missing []Permission
	checked time.Time // zero: never
}

// New is a Checker of client's identity in namespace; now is its clock.
func New(client kubernetes.Interface, namespace string, now func() time.Time) *Checker {
	return &Checker{client: client, namespace: namespace, now: now}
}

// explainEvery bounds how often a refused write asks the apiserver what is missing
// (Explain): a check is one SelfSubjectAccessReview per permission (len(Required)), and a client
// retrying a refused create must not turn each retry into as many more calls. Within it, the
// last check's answer explains the refusal.
const explainEvery = 30 * time.Second

// Check asks the apiserver (one SelfSubjectAccessReview per permission, in parallel)
// which of Required this identity may not do in the namespace, remembers the answer
// for Missing, and returns it.
func (c *Checker) Check(ctx context.Context) ([]Permission, error) {
	type answer struct {
		p       Permission
		allowed bool
		err     error
	}
	answers := make(chan answer, len(Required))
	for _, p := range Required {
		go func() {
			r, err := c.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: c.namespace, Verb: p.Verb, Group: p.Group, Resource: p.Resource,
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
		return nil, fmt.Errorf("checking permissions: %w", firstErr)
	}
	sortPermissions(missing)
	c.mu.Lock()
	c.missing, c.checked = missing, c.now()
	c.mu.Unlock()
	return missing, nil
}

// Missing is what the last check found missing (nil before the first).
func (c *Checker) Missing() []Permission {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.missing
}

// Names lists permissions as "verb group/resource", for logs.
func Names(ps []Permission) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.String()
	}
	return names
}

// Describe says, in one line, what is missing and how to fix it.
func (c *Checker) Describe(missing []Permission) string {
	return fmt.Sprintf("the provider may not %s in namespace %s (grant them with the Role in deploy/base/role.yaml)",
		strings.Join(Names(missing), ", "), c.namespace)
}

// Explain is what a write the apiserver refused for RBAC lacks (Describe; "" when the
// check finds nothing missing or cannot ask), asking the apiserver again (the Role may
// have changed since start) at most once per explainEvery; within it, the last check's
// answer is used. The check is bounded and detached from a request that may have
// timed out.
func (c *Checker) Explain(ctx context.Context) string {
	missing, ok := c.recentCheck()
	if !ok {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		var err error
		if missing, err = c.Check(ctx); err != nil {
			return ""
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return c.Describe(missing)
}

// recentCheck is the last check's answer when it is younger than explainEvery. A check
// is claimed before it is made: while one is asking, the others take the previous
// answer (or none) rather than asking too.
func (c *Checker) recentCheck() ([]Permission, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !checkDue(c.checked, now) {
		return c.missing, true
	}
	c.checked = now // claimed; Check sets it again when done
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
