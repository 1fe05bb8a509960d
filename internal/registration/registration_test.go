package registration

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"
)

func payloadJSON(t *testing.T, o Options) map[string]any {
	t.Helper()
	o.RegistryURL = "http://registry:8080/api/v1alpha1"
	r, err := New(o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r.Payload())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func TestPayload(t *testing.T) {
	m := payloadJSON(t, Options{Name: "k8s-container-sp", Endpoint: "http://sp:8080/"})
	if m["name"] != "k8s-container-sp" || m["endpoint"] != "http://sp:8080/api/v1alpha1/containers" ||
		m["service_type"] != "container" || m["schema_version"] != "v1alpha1" || m["id"] != nil || m["metadata"] != nil {
		t.Errorf("minimal payload: %v", m)
	}
	if ops, _ := m["operations"].([]any); len(ops) != 3 {
		t.Errorf("operations %v", m["operations"])
	}

	m = payloadJSON(t, Options{Name: "sp", DisplayName: "SP", Endpoint: "http://sp", Region: "r", Zone: "z",
		Capacity: Capacity{TotalCPU: 200, TotalMemory: "2TB"}})
	md := m["metadata"].(map[string]any)
	res := md["resources"].(map[string]any)
	// total_cpu is an integer: the registry refuses the string "200".
	if m["display_name"] != "SP" || md["region_code"] != "r" || md["zone"] != "z" || res["total_cpu"] != float64(200) ||
		res["total_memory"] != "2TB" || res["total_node"] != nil || res["total_storage"] != nil {
		t.Errorf("full payload: %v", m)
	}
}
