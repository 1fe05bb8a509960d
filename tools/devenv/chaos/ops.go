package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

const containersPath = "/api/v1alpha1/containers"

// specBody is a small container spec: a few millicores, so two fake nodes hold hundreds.
func specBody(image, ports string) map[string]any {
	spec := map[string]any{
		"service_type": "container",
		"metadata":     map[string]any{"name": "app"},
		"image":        map[string]any{"reference": image},
		"resources": map[string]any{"cpu": map[string]any{"min": "10m", "max": "50m"},
			"memory": map[string]any{"min": "16MB", "max": "32MB"}},
	}
	if ports != "" {
		spec["network"] = map[string]any{"ports": []any{map[string]any{"container_port": 8080, "visibility": ports}}}
	}
	return spec
}

// answer is one HTTP exchange as the history keeps it.
type answer struct {
	code    int
	problem string
	status  string
	err     string
	refused bool
	proc    string
}

func (a answer) into(e Entry) Entry {
	e.Code, e.Problem, e.Status, e.Err, e.Refused = a.code, a.problem, a.status, a.err, a.refused
	if a.proc != "" {
		e.Proc = a.proc
	}
	return e
}

// do sends one request and reads what the checks need of the answer.
func (w *World) do(ctx context.Context, method, url string, body any) answer {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return answer{err: err.Error()}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return answer{err: err.Error(), refused: errors.Is(err, syscall.ECONNREFUSED)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	a := answer{code: resp.StatusCode}
	var m struct {
		Type   string `json:"type"`
		Status any    `json:"status"`
	}
	if json.Unmarshal(b, &m) == nil {
		if resp.StatusCode >= 300 && m.Type != "" {
			a.problem = path.Base(m.Type)
		}
		if s, ok := m.Status.(string); ok && resp.StatusCode < 300 {
			a.status = s
		}
	}
	return a
}

// replicaURL is where a request "via a" or "via b" goes now, and which process that is.
func (w *World) replicaURL(via string) (proc, url string) {
	if r := w.Replicas[via]; r != nil {
		return r.Current()
	}
	return "", ""
}

func (w *World) create(ctx context.Context, s Step, via string) Entry {
	e := Entry{Type: "op", Kind: OpCreate, Step: s.N, Via: via, ID: s.ID, Image: s.Image, Start: time.Now()}
	var a answer
	if via == "registry" {
		a = w.do(ctx, http.MethodPost, w.Registry.URL+"/service-type-instances?id="+s.ID,
			map[string]any{"provider_name": providerName, "spec": specBody(s.Image, s.Ports)})
	} else {
		proc, url := w.replicaURL(via)
		a = w.do(ctx, http.MethodPost, url+containersPath+"?id="+s.ID, map[string]any{"spec": specBody(s.Image, s.Ports)})
		a.proc = proc
	}
	e.End = time.Now()
	return w.Hist.Add(a.into(e))
}

func (w *World) delete(ctx context.Context, s Step, via string) Entry {
	e := Entry{Type: "op", Kind: OpDelete, Step: s.N, Via: via, ID: s.ID, Start: time.Now()}
	var a answer
	if via == "registry" {
		a = w.do(ctx, http.MethodDelete, w.Registry.URL+"/service-type-instances/"+s.ID, nil)
	} else {
		proc, url := w.replicaURL(via)
		a = w.do(ctx, http.MethodDelete, url+containersPath+"/"+s.ID, nil)
		a.proc = proc
	}
	e.End = time.Now()
	return w.Hist.Add(a.into(e))
}

// handDelete is `kubectl delete deployment` of the container's Deployment(s).
func (w *World) handDelete(ctx context.Context, s Step) Entry {
	e := Entry{Type: "op", Kind: OpHandDelete, Step: s.N, Via: "kubectl", ID: s.ID, Start: time.Now()}
	deps := w.Env.Admin.AppsV1().Deployments(w.NS)
	list, err := deps.List(ctx, metav1.ListOptions{LabelSelector: container.InstanceSelector(s.ID)})
	if err == nil {
		for _, d := range list.Items {
			if d.DeletionTimestamp != nil {
				continue
			}
			if err = deps.Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
				break
			}
			e.Count++
		}
	}
	if err != nil {
		e.Err = err.Error()
		e.Refused = errors.Is(err, syscall.ECONNREFUSED)
	}
	e.End = time.Now()
	return w.Hist.Add(e)
}

func (w *World) get(ctx context.Context, s Step, via string) Entry {
	e := Entry{Type: "op", Kind: OpGet, Step: s.N, Via: via, ID: s.ID, Start: time.Now()}
	proc, url := w.replicaURL(via)
	a := w.do(ctx, http.MethodGet, url+containersPath+"/"+s.ID, nil)
	a.proc = proc
	e.End = time.Now()
	return w.Hist.Add(a.into(e))
}

func (w *World) list(ctx context.Context, s Step, via string) Entry {
	e := Entry{Type: "op", Kind: OpList, Step: s.N, Via: via, Start: time.Now()}
	proc, url := w.replicaURL(via)
	a := w.do(ctx, http.MethodGet, url+containersPath+"?max_page_size=1000", nil)
	a.proc = proc
	e.End = time.Now()
	return w.Hist.Add(a.into(e))
}

// listViews is a replica's LIST as id -> status, every page.
func (w *World) listViews(ctx context.Context, url string) (map[string]APIView, error) {
	out := map[string]APIView{}
	token := ""
	for {
		var page struct {
			Containers []struct {
				ID            string `json:"id"`
				Status        string `json:"status"`
				StatusMessage string `json:"status_message"`
			} `json:"containers"`
			Next string `json:"next_page_token"`
		}
		u := url + containersPath + "?max_page_size=1000"
		if token != "" {
			u += "&page_token=" + token
		}
		if err := w.getJSON(ctx, u, &page); err != nil {
			return nil, err
		}
		for _, c := range page.Containers {
			out[c.ID] = APIView{Status: c.Status, Message: c.StatusMessage}
		}
		if page.Next == "" {
			return out, nil
		}
		token = page.Next
	}
}

// foreign makes what another DCM provider (database, network) leaves in the namespace: a
// Deployment and a Service with DCM's managed-by and instance-id labels, an id this run
// uses, and its own service type. The service must never touch them (check.go); the
// entry keeps them as made.
func (w *World) foreign(ctx context.Context, s Step) Entry {
	e := Entry{Type: "op", Kind: OpForeign, Step: s.N, Via: "kubectl", ID: s.ID, Target: s.ServiceType, Start: time.Now()}
	labels := map[string]string{
		container.LabelManagedBy:   container.ManagedByValue,
		container.LabelInstanceID:  s.ID,
		container.LabelServiceType: s.ServiceType,
	}
	d, err := w.Env.Admin.AppsV1().Deployments(w.NS).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{GenerateName: s.ServiceType + "-", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "example.invalid/" + s.ServiceType + ":v1"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err == nil {
		e.Foreign = append(e.Foreign, foreignOf("Deployment", &d.ObjectMeta))
		var svc *corev1.Service
		svc, err = w.Env.Admin.CoreV1().Services(w.NS).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{GenerateName: s.ServiceType + "-", Labels: labels},
			Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 5432}}},
		}, metav1.CreateOptions{})
		if err == nil {
			e.Foreign = append(e.Foreign, foreignOf("Service", &svc.ObjectMeta))
		}
	}
	if err != nil {
		e.Err = err.Error()
		e.Refused = errors.Is(err, syscall.ECONNREFUSED)
	}
	e.End = time.Now()
	return w.Hist.Add(e)
}

// observeForeign records every other provider's object as it is now, so the check sees
// one touched during the run even if something put it back.
func (w *World) observeForeign(ctx context.Context) {
	e := Entry{Type: "observe", Kind: OpForeign, Start: time.Now()}
	objs, err := w.foreignObjects(ctx)
	if err != nil {
		e.Err = err.Error()
	}
	e.Foreign, e.End = objs, time.Now()
	w.Hist.Add(e)
}

// createCleanup is DCM's clean-up after its create timed out: the POST through one
// replica, and s.Lag after it was sent, the DELETE through the other.
func (w *World) createCleanup(ctx context.Context, s Step) {
	var wg sync.WaitGroup
	wg.Go(func() { w.create(ctx, s, s.Via[0]) })
	sleep(ctx, s.Lag)
	w.delete(ctx, s, s.Via[1])
	wg.Wait()
}
