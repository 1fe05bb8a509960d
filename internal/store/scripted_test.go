package store

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// A scripted apiserver, for the store's unit tests: client-go talks HTTP to it as to
// the real one, and it answers each request from the test's script (by verb and
// resource: "POST deployments", "DELETE configmaps") or as a plain apiserver would
// (a create is made, with a generated name and a UID; a delete succeeds; a GET finds
// nothing), recording every request. So a test lists the exact calls a path makes and
// sees how the store takes each answer, failures included, which the real apiserver
// gives only under faults. What the cluster does with the calls (ownerReferences,
// finalizers, the garbage collector, generated names, preconditions) is tested against
// the real control plane in tools/devenv/e2e/store.
type scripted struct {
	mu    sync.Mutex
	calls []string
	// answers: by "VERB resource", the answer to give instead of the plain one.
	answers map[string]answer
}

// answer is a scripted reply: an error (an *apierrors.StatusError), or obj with 200.
type answer struct {
	err error
	obj runtime.Object
}

func refuse(err error) answer { return answer{err: err} }

// newScripted starts a scripted apiserver and a Store whose client (and Confirm
// client) talk to it, in namespace ns.
func newScripted(t *testing.T, answers map[string]answer) (*scripted, *Store) {
	t.Helper()
	a := &scripted{answers: answers}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	// JSON both ways (client-go sends protobuf by default): the answers are plain JSON.
	s := storeOver(t, &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
		ContentType: "application/json", AcceptContentTypes: "application/json"}, QPS: 1000, Burst: 1000}, "ns")
	// A still clock: a create's record is always reserved in time, and a DELETE's wait
	// for creates that began before it is the window, a millisecond.
	s.Clock = clocktesting.NewFakePassiveClock(time.Now())
	s.ReserveWindow = time.Millisecond
	return a, s
}

// requests are the calls made so far, sorted ("VERB resource[/name]"): calls sent at
// once arrive in any order.
func (a *scripted) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(slices.Values(a.calls))
}

var scriptedTypes = map[string]func() runtime.Object{
	"configmaps":  func() runtime.Object { return &corev1.ConfigMap{} },
	"deployments": func() runtime.Object { return &appsv1.Deployment{} },
	"services":    func() runtime.Object { return &corev1.Service{} },
}

var scriptedKinds = map[string]schema.GroupVersionKind{
	"configmaps":  corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	"deployments": appsv1.SchemeGroupVersion.WithKind("Deployment"),
	"services":    corev1.SchemeGroupVersion.WithKind("Service"),
}

func (a *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// /api/v1/namespaces/ns/<resource>[/<name>] or /apis/<group>/<version>/namespaces/ns/...
	_, rest, _ := strings.Cut(r.URL.Path, "/namespaces/ns/")
	resource, name, _ := strings.Cut(rest, "/")
	if rest == "" {
		resource = r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	}
	call := r.Method + " " + resource
	a.mu.Lock()
	a.calls = append(a.calls, strings.TrimSuffix(call+"/"+name, "/"))
	ans, scripted := a.answers[call]
	a.mu.Unlock()
	if scripted {
		if ans.err != nil {
			replyStatus(w, ans.err.(apierrors.APIStatus).Status())
			return
		}
		reply(w, http.StatusOK, ans.obj)
		return
	}
	switch r.Method {
	case http.MethodPost:
		newObj, ok := scriptedTypes[resource]
		if !ok {
			http.Error(w, "not scripted: "+call, http.StatusNotImplemented)
			return
		}
		obj := newObj()
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, obj); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reply(w, http.StatusCreated, madeBy(obj, scriptedKinds[resource]))
	case http.MethodDelete, http.MethodPatch:
		reply(w, http.StatusOK, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
	default:
		replyStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name).Status())
	}
}

// madeBy is obj as an apiserver makes it: its name generated (when asked), a UID of
// its name, resourceVersion 1.
func madeBy(obj runtime.Object, gvk schema.GroupVersionKind) runtime.Object {
	m := obj.(metav1.Object)
	if m.GetName() == "" {
		m.SetName(m.GetGenerateName() + "x1")
	}
	m.SetNamespace("ns")
	m.SetUID(types.UID("uid-" + m.GetName()))
	m.SetResourceVersion("1")
	m.SetCreationTimestamp(metav1.NewTime(time.Now().Truncate(time.Second)))
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj
}

// replyStatus answers with a failure, as an apiserver does: a Status with its code.
func replyStatus(w http.ResponseWriter, st metav1.Status) {
	st.Kind, st.APIVersion = "Status", "v1"
	reply(w, int(st.Code), &st)
}

func reply(w http.ResponseWriter, code int, obj runtime.Object) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(obj); err != nil {
		panic(fmt.Sprint("encoding a scripted answer: ", err))
	}
}

// objectsX are container x's objects as a create asks for them (a Service when
// withService), its request's key key.
func objectsX(withService bool, key string) container.Objects {
	l := container.SystemLabels("x")
	o := container.Objects{
		Request: container.Request{Key: key, Digest: "d1"},
		Deployment: &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Labels: l},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: l},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}},
		},
	}
	if withService {
		o.Service = &corev1.Service{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Labels: l},
			Spec: corev1.ServiceSpec{Selector: l, Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	return o
}

// recordX is container x's record as the apiserver holds it, made by a request with key
// key, edited by edit.
func recordX(key string, edit ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	c := container.NewRecord("x", container.Request{Key: key, Digest: "d1"})
	madeBy(c, scriptedKinds["configmaps"])
	c.UID = "uid-old"
	for _, e := range edit {
		e(c)
	}
	return c
}

func deletingRecord(c *corev1.ConfigMap) { c.DeletionTimestamp = ptr.To(metav1.Now()) }
