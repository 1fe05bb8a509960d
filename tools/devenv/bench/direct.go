package bench

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// The direct fill. Through the controllers, a container costs the control plane about
// 15 writes (the controllers' ReplicaSet, pod, binding, events and a few status updates
// each), and on 2 CPUs filling 10,000 took 13-16 minutes, most of make bench. What the
// service reads of a running container is its record, Deployment, pod and Service, so
// above the first size the bench writes those as the controllers would have left them,
// with the controller-manager stopped: the record, the Deployment and the Service as the
// service's create makes them, the Deployment's status, its ReplicaSet and the
// ReplicaSet's status copied from a container the controllers made (their annotations,
// conditions and counts; names, uids and labels its own), and its pod bound to a fake
// node, whose status kwok writes as for any pod. The controller-manager then starts
// again and finds nothing to change (it reads a ReplicaSet whose template matches the
// Deployment's as the Deployment's new one, whatever its hash).

// shape is a running container's Deployment status and ReplicaSet as the controllers
// left them: what the direct fill copies.
type shape struct {
	annotations map[string]string // the controller's on the Deployment (its revision)
	status      appsv1.DeploymentStatus
	rs          *appsv1.ReplicaSet
	nodes       []string // the fake nodes the pods are spread over
}

// shapeOf reads the objects of container id (made through the controllers and running)
// in ns.
func (e *Env) shapeOf(ctx context.Context, ns, id string) (*shape, error) {
	deps, err := e.Admin.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: container.LabelInstanceID + "=" + id})
	if err != nil {
		return nil, err
	}
	if len(deps.Items) != 1 {
		return nil, fmt.Errorf("%s has %d Deployments", id, len(deps.Items))
	}
	d := &deps.Items[0]
	rss, err := e.Admin.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: container.LabelInstanceID + "=" + id})
	if err != nil {
		return nil, err
	}
	if len(rss.Items) != 1 || d.Status.AvailableReplicas != 1 {
		return nil, fmt.Errorf("%s has %d ReplicaSets and %d available replicas", id, len(rss.Items), d.Status.AvailableReplicas)
	}
	nodes, err := e.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s := &shape{annotations: map[string]string{}, status: d.Status, rs: &rss.Items[0]}
	for k, v := range d.Annotations {
		if strings.HasPrefix(k, "deployment.kubernetes.io/") {
			s.annotations[k] = v
		}
	}
	for _, n := range nodes.Items {
		if n.Annotations[harness.KwokNodeAnnotation] == "fake" {
			s.nodes = append(s.nodes, n.Name)
		}
	}
	if len(s.nodes) == 0 {
		return nil, fmt.Errorf("no fake nodes")
	}
	return s, nil
}

// createDirect writes container i's objects (objs, its record already written) as the
// controllers would have left them: see above.
func (e *Env) createDirect(ctx context.Context, ns string, i int, objs container.Objects, sh *shape) error {
	d := objs.Deployment.DeepCopy()
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	maps.Copy(d.Annotations, sh.annotations)
	d, err := e.Fill.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	hash := podTemplateHash(d.Name)
	rsName := d.Name + "-" + hash
	d.Status = *sh.status.DeepCopy()
	for n, c := range d.Status.Conditions {
		// "ReplicaSet "<name>" has successfully progressed."
		if old := sh.rs.Name; strings.Contains(c.Message, old) {
			d.Status.Conditions[n].Message = strings.ReplaceAll(c.Message, old, rsName)
		}
	}
	if _, err := e.Fill.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("deployment status: %w", err)
	}
	withHash := func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		m[appsv1.DefaultDeploymentUniqueLabelKey] = hash
		return m
	}
	yes := true
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: rsName, Namespace: ns, Labels: withHash(d.Spec.Template.Labels),
			Annotations: maps.Clone(sh.rs.Annotations),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID,
				Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, MinReadySeconds: d.Spec.MinReadySeconds,
			Selector: &metav1.LabelSelector{MatchLabels: withHash(d.Spec.Selector.MatchLabels)},
			Template: *d.Spec.Template.DeepCopy()},
	}
	rs.Spec.Template.Labels = withHash(d.Spec.Template.Labels)
	if rs, err = e.Fill.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("replicaset: %w", err)
	}
	rs.Status = *sh.rs.Status.DeepCopy()
	if _, err := e.Fill.AppsV1().ReplicaSets(ns).UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("replicaset status: %w", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: rsName + "-", Namespace: ns, Labels: rs.Spec.Template.Labels,
			Annotations: rs.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID,
				Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: *rs.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = sh.nodes[i%len(sh.nodes)]
	if _, err := e.Fill.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("pod: %w", err)
	}
	return nil
}

// podTemplateHash is a pod-template-hash label value shaped like the controller's (ten
// of rand's safe characters from an FNV hash), from the Deployment's name.
func podTemplateHash(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// startControllerManager starts the controller-manager again and returns once its
// controllers work: a probe Deployment in a namespace of its own got its pod (the
// controllers start their workers only once their caches are synced, so by then every
// Deployment and ReplicaSet of the fill has been queued), deleted again.
func (e *Env) startControllerManager(ctx context.Context) error {
	if err := e.Cluster.StartComponent(ctx, "kube-controller-manager"); err != nil {
		return err
	}
	const ns = "bench-probe"
	if err := harness.EnsureNamespace(ctx, e.Admin, ns); err != nil {
		return err
	}
	objs, err := rawObjects(ns, "probe")
	if err != nil {
		return err
	}
	d := objs.Deployment
	d.Namespace = ns
	d, err = e.Admin.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	defer func() {
		bg := metav1.DeletePropagationBackground
		if err := e.Admin.AppsV1().Deployments(ns).Delete(context.WithoutCancel(ctx), d.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			fmt.Fprintln(e.Log, "bench: deleting the probe Deployment:", err)
		}
	}()
	return waitUntil(ctx, 3*time.Minute, func() bool {
		pods, err := e.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) > 0
	})
}
