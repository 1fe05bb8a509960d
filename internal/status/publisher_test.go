package status

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	cloudevent "github.com/cloudevents/sdk-go/v2/event"
	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// at is when the test reports were observed: not a whole second, so the test sees the
// precision kept.
var at = time.Date(2026, 1, 21, 10, 0, 0, 250_000_000, time.FixedZone("CET", 3600))

// runningReport is a RUNNING report of a container with a LoadBalancer Service whose
// address is assigned, an internal port and one it keeps to itself.
func runningReport() Report {
	dep := &container.Deployment{Meta: container.Meta{Namespace: "tenant-a"},
		Container: container.Container{Ports: []int32{8080, 9090}}}
	pod := &container.Pod{Phase: corev1.PodRunning, IP: "10.244.0.4"}
	svc := &container.Service{Meta: container.Meta{Name: "web-app-r4h5q"}, Type: corev1.ServiceTypeLoadBalancer,
		ClusterIP: "10.96.67.170", ExternalIP: "34.123.45.67",
		Ports: []container.ServicePort{{Port: 8080, TargetPort: 8080, NodePort: 30854, Protocol: corev1.ProtocolTCP}}}
	return Report{Status: container.Status{Status: v1alpha1.RUNNING, Message: "Container is running."},
		Outputs: container.OutputsOf(container.Observed{Deployment: dep, Service: svc, Pods: []*container.Pod{pod}}), Observed: at}
}

// The structured-mode JSON is exactly what DCM's consumer reads.
func TestEventFormat(t *testing.T) {
	ev, err := NewEvent("dcm/providers/k8s-container-sp", NewEventID(), "abc-123", runningReport())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"specversion": "1.0", "source": "dcm/providers/k8s-container-sp", "type": "dcm.status.container",
		"subject": "dcm.container", "datacontenttype": "application/json", "time": "2026-01-21T09:00:00.25Z",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if id, _ := got["id"].(string); len(id) != 36 {
		t.Errorf("event id %q", got["id"])
	}
	if first, second := NewEventID(), NewEventID(); first == second {
		t.Errorf("event ids repeat: %q", first)
	}
	// The data, byte for byte: id, status and message as before, the timestamp the
	// event's time, output_spec in DCM's names.
	data, err := json.Marshal(got["data"]) // keys sorted
	if err != nil {
		t.Fatal(err)
	}
	wantData := `{"id":"abc-123","message":"Container is running.",` +
		`"output_spec":{"endpoints":[` +
		`{"address":"10.96.67.170","port":8080,"protocol":"TCP","scope":"internal"},` +
		`{"address":"34.123.45.67","port":8080,"protocol":"TCP","scope":"external"}],` +
		`"namespace":"tenant-a",` +
		`"provider_hints":{"cluster_ip":"10.96.67.170","external_ip":"34.123.45.67","pod_ip":"10.244.0.4",` +
		`"ports":[{"container_port":8080,"visibility":"external"},{"container_port":9090,"visibility":"none"}],` +
		`"service_name":"web-app-r4h5q","service_type":"LoadBalancer"}},` +
		`"status":"RUNNING","timestamp":"2026-01-21T09:00:00.25Z"}`
	if string(data) != wantData {
		t.Errorf("data\n got %s\nwant %s", data, wantData)
	}

	// Any other status: id, status, message and timestamp; no output_spec.
	ev, err = NewEvent("dcm/providers/k8s-container-sp", NewEventID(), "abc-123",
		Report{Status: container.Status{Status: v1alpha1.PENDING, Message: "Container is being created."}, Observed: at})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(ev.Data()), `{"id":"abc-123","status":"PENDING","message":"Container is being created.","timestamp":"2026-01-21T09:00:00.25Z"}`; got != want {
		t.Errorf("data\n got %s\nwant %s", got, want)
	}
}

// dcmStatusEvent is the payload type of DCM's status consumer, copied from
// dcm-project/control-plane, internal/sp/consumer/consumer.go (StatusEvent, at commit
// feead8211ac699cacec1757b3021d58d60c33fe4). The consumer decodes the message with
// the CloudEvents SDK (event.Event), then its Data() into this; it stores output_spec
// with the instance and hands it to placement on RUNNING.
type dcmStatusEvent struct {
	Id         string         `json:"id"`
	Status     string         `json:"status"`
	Message    string         `json:"message"`
	OutputSpec map[string]any `json:"output_spec,omitempty"`
	Timestamp  time.Time      `json:"timestamp"`
}

// dcmContainerEndpoint is DCM's catalog container type's endpoint, copied from
// dcm-project/control-plane, api/catalog/v1alpha1/servicetypes/container/types.gen.go
// (ContainerEndpoint, at commit 05754c5a46e18843621d7244f5c5a22d8e29d3b9), without the
// additional properties it would accept.
type dcmContainerEndpoint struct {
	Address  string  `json:"address"`
	Port     int     `json:"port"`
	Protocol *string `json:"protocol,omitempty"`
	Scope    string  `json:"scope"`
}

// dcmContainerOutputs is the container service type's output definition in DCM's
// cross-provider outputs proposal (dcm-project/enhancements,
// enhancements/cross-provider-outputs/cross-provider-outputs.md: namespace and
// endpoints[]{address, port, scope}), with provider_hints, the reserved object DCM does
// not validate. Decoded strictly: a key it does not declare would be one DCM's
// capture-time validation rejects.
type dcmContainerOutputs struct {
	Namespace     string                 `json:"namespace"`
	Endpoints     []dcmContainerEndpoint `json:"endpoints"`
	ProviderHints map[string]any         `json:"provider_hints"`
}

// What DCM's consumer reads of our events, decoded the way it decodes them.
func TestDCMConsumerReadsTheEvent(t *testing.T) {
	decode := func(t *testing.T, rep Report) dcmStatusEvent {
		t.Helper()
		ev, err := NewEvent("dcm/providers/k8s-container-sp", NewEventID(), "abc-123", rep)
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var got cloudevent.Event
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		var payload dcmStatusEvent
		if err := json.Unmarshal(got.Data(), &payload); err != nil {
			t.Fatal(err)
		}
		if !got.Time().Equal(payload.Timestamp) {
			t.Errorf("event time %s, data timestamp %s", got.Time(), payload.Timestamp)
		}
		return payload
	}

	t.Run("RUNNING: its outputs", func(t *testing.T) {
		got := decode(t, runningReport())
		if got.Id != "abc-123" || got.Status != "RUNNING" || got.Message != "Container is running." || !got.Timestamp.Equal(at) {
			t.Errorf("payload %+v", got)
		}
		if got.OutputSpec == nil {
			t.Fatal("no output_spec: DCM's placement gets none on RUNNING")
		}
		raw, err := json.Marshal(got.OutputSpec)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var outs dcmContainerOutputs
		if err := dec.Decode(&outs); err != nil {
			t.Fatalf("output_spec %s: %v", raw, err)
		}
		tcp := "TCP"
		want := []dcmContainerEndpoint{
			{Address: "10.96.67.170", Port: 8080, Protocol: &tcp, Scope: "internal"},
			{Address: "34.123.45.67", Port: 8080, Protocol: &tcp, Scope: "external"},
		}
		if outs.Namespace != "tenant-a" || len(outs.Endpoints) != len(want) {
			t.Fatalf("outputs %+v", outs)
		}
		for i, e := range outs.Endpoints {
			if e.Address != want[i].Address || e.Port != want[i].Port || e.Protocol == nil || *e.Protocol != "TCP" || e.Scope != want[i].Scope {
				t.Errorf("endpoint %d = %+v, want %+v", i, e, want[i])
			}
		}
		if outs.ProviderHints["pod_ip"] != "10.244.0.4" || outs.ProviderHints["service_name"] != "web-app-r4h5q" {
			t.Errorf("provider_hints %v", outs.ProviderHints)
		}
	})
	t.Run("RUNNING without a Service: an empty endpoints, not none", func(t *testing.T) {
		rep := Report{Status: container.Status{Status: v1alpha1.RUNNING, Message: "Container is running."}, Observed: at,
			Outputs: container.OutputsOf(container.Observed{Deployment: &container.Deployment{Meta: container.Meta{Namespace: "tenant-a"}}})}
		got := decode(t, rep)
		if e, ok := got.OutputSpec["endpoints"].([]any); !ok || len(e) != 0 {
			t.Errorf("output_spec %v, want endpoints []", got.OutputSpec)
		}
	})
	for _, s := range []v1alpha1.ContainerStatus{v1alpha1.PENDING, v1alpha1.FAILED, v1alpha1.UNKNOWN, v1alpha1.DELETED} {
		t.Run(string(s)+": no output_spec, DCM keeps what it stored", func(t *testing.T) {
			got := decode(t, Report{Status: container.Status{Status: s, Message: "m"}, Observed: at})
			if got.Status != string(s) || got.OutputSpec != nil || !got.Timestamp.Equal(at) {
				t.Errorf("payload %+v", got)
			}
		})
	}
}
