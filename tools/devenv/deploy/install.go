package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/postrender"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// Defaults of an install.
const (
	DefaultRelease   = "k8s-container-sp"
	DefaultNamespace = "k8s-container-sp"
)

// Options say what to install where.
type Options struct {
	Kubeconfig string // a harness cluster's, with the real node
	Release    string // Helm release; DefaultRelease when empty
	Namespace  string // the provider's (the release's); DefaultNamespace when empty
	// ContainersNamespace is where the containers go: empty, the chart's default
	// (<Namespace>-containers), which Install creates as a real-node namespace.
	ContainersNamespace string
	// Image is make image's OCI layout (folder or tarball); ImageRef the name pods use.
	Image, ImageRef string
	Replicas        int // 1 when 0
	// NATSURL and RegistrationURL are NATS's and DCM's registry's on this machine
	// (127.0.0.1); their ports are exposed to pods on the node's bridge.
	NATSURL, RegistrationURL string
	Values                   map[string]any          // more chart values; they win
	PostRenderer             postrender.PostRenderer // e.g. AssignUID, as a platform would
	Timeout                  time.Duration           // until every pod is ready; 3 min when 0
	NoWait                   bool                    // return once the objects are created
	Out                      io.Writer
}

// Installed is what Install left running.
type Installed struct {
	Release, Namespace string
	// ContainersNamespace is the tenants' (SP_K8S_NAMESPACE).
	ContainersNamespace string
	// URLs are the pods' API endpoints, reachable from this machine.
	URLs []string
	Took time.Duration
}

// DefaultContainersNamespace is the chart's default for the containers' namespace of a
// release in namespace ns (the chart's "namespace" value left empty).
func DefaultContainersNamespace(ns string) string {
	n := ns + "-containers"
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-")
	}
	return n
}

// RemoveCommand is how a person removes what make deploy installed.
const RemoveCommand = "make undeploy"

// Install pushes the image to the node's registry, makes the namespace one whose pods
// run on the real node, and installs (or upgrades) the chart with Helm's library,
// waiting until every pod is ready.
func Install(ctx context.Context, node *harness.RealNode, o Options) (*Installed, error) {
	start := time.Now()
	o = withDefaults(o)
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	natsURL, err := exposed(node, o.NATSURL)
	if err != nil {
		return nil, fmt.Errorf("NATS: %w", err)
	}
	regURL, err := exposed(node, o.RegistrationURL)
	if err != nil {
		return nil, fmt.Errorf("DCM's registry: %w", err)
	}
	extra := o.Values
	if o.ContainersNamespace != DefaultContainersNamespace(o.Namespace) {
		extra = maps.Clone(o.Values)
		if extra == nil {
			extra = map[string]any{}
		}
		if _, set := extra["namespace"]; !set {
			extra["namespace"] = o.ContainersNamespace
		}
	}
	vals, err := Values(o.ImageRef, natsURL, regURL, o.Replicas, extra)
	if err != nil {
		return nil, err
	}
	if _, err := node.PushImage(ctx, o.Image, o.ImageRef); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// Both namespaces run their pods on the real node: the provider's, and the
	// containers' (the chart creates neither by default, as a user would).
	for _, ns := range []string{o.Namespace, o.ContainersNamespace} {
		if err := harness.RealNodeNamespace(ctx, cs, ns); err != nil {
			return nil, err
		}
	}
	chart, err := loader.Load(filepath.Join(root, "deploy", "helm", "k8s-container-sp"))
	if err != nil {
		return nil, err
	}
	hc, err := helmConfig(o)
	if err != nil {
		return nil, err
	}
	_, err = action.NewHistory(hc).Run(o.Release)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		in := action.NewInstall(hc)
		in.ReleaseName, in.Namespace, in.Wait, in.Timeout, in.PostRenderer = o.Release, o.Namespace, !o.NoWait, o.Timeout, o.PostRenderer
		_, err = in.RunWithContext(ctx, chart, vals)
	case err == nil:
		up := action.NewUpgrade(hc)
		up.Namespace, up.Wait, up.Timeout, up.PostRenderer = o.Namespace, !o.NoWait, o.Timeout, o.PostRenderer
		_, err = up.RunWithContext(ctx, o.Release, chart, vals)
	}
	if err != nil {
		return nil, fmt.Errorf("helm install %s in %s: %w", o.Release, o.Namespace, err)
	}
	urls, err := podURLs(ctx, cs, o.Namespace, o.Release)
	if err != nil {
		return nil, err
	}
	return &Installed{Release: o.Release, Namespace: o.Namespace, ContainersNamespace: o.ContainersNamespace, URLs: urls, Took: time.Since(start)}, nil
}

// Uninstall removes the release (and waits for its objects to go). The containers the
// service created, their records and both namespaces stay: `k8s-container-sp release`
// removes the containers and records.
func Uninstall(ctx context.Context, o Options) error {
	o = withDefaults(o)
	hc, err := helmConfig(o)
	if err != nil {
		return err
	}
	un := action.NewUninstall(hc)
	un.Wait, un.Timeout = true, o.Timeout
	if _, err := un.Run(o.Release); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("helm uninstall %s in %s: %w", o.Release, o.Namespace, err)
	}
	return nil
}

func withDefaults(o Options) Options {
	if o.Release == "" {
		o.Release = DefaultRelease
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.ContainersNamespace == "" {
		if ns, ok := o.Values["namespace"].(string); ok && ns != "" {
			o.ContainersNamespace = ns
		} else {
			o.ContainersNamespace = DefaultContainersNamespace(o.Namespace)
		}
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return o
}

func helmConfig(o Options) (*action.Configuration, error) {
	s := cli.New()
	s.KubeConfig = o.Kubeconfig
	s.SetNamespace(o.Namespace)
	hc := new(action.Configuration)
	logf := func(format string, v ...any) { fmt.Fprintf(o.Out, "helm: "+format+"\n", v...) }
	if err := hc.Init(s.RESTClientGetter(), o.Namespace, "secret", logf); err != nil {
		return nil, err
	}
	return hc, nil
}

// exposed makes a 127.0.0.1 URL's port reachable from pods and returns the URL they use.
func exposed(node *harness.RealNode, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() != "127.0.0.1" || u.Port() == "" {
		return "", fmt.Errorf("%q is not a 127.0.0.1 URL with a port (export $(make cluster-up REAL_NODE=1) sets them)", raw)
	}
	port, _ := strconv.Atoi(u.Port())
	addr, err := node.ExposeToPods(port)
	if err != nil {
		return "", err
	}
	u.Host = addr
	return u.String(), nil
}

// podURLs are the release's pods' API endpoints.
func podURLs(ctx context.Context, cs kubernetes.Interface, ns, release string) ([]string, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil {
		return nil, err
	}
	var urls []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			urls = append(urls, "http://"+p.Status.PodIP+":8080")
		}
	}
	return urls, nil
}
