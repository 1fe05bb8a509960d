package status

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// The structured-mode JSON is exactly what DCM's consumer reads.
func TestEventFormat(t *testing.T) {
	now := time.Date(2026, 1, 21, 10, 0, 0, 0, time.UTC)
	ev, err := NewEvent("dcm/providers/k8s-container-sp", NewEventID(), "abc-123", container.Status{Status: v1alpha1.RUNNING, Message: "Container is running."}, now)
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
		"subject": "dcm.container", "datacontenttype": "application/json", "time": "2026-01-21T10:00:00Z",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	data, _ := got["data"].(map[string]any)
	if data["id"] != "abc-123" || data["status"] != "RUNNING" || data["message"] != "Container is running." || len(data) != 3 {
		t.Errorf("data = %v", got["data"])
	}
	if id, _ := got["id"].(string); len(id) != 36 {
		t.Errorf("event id %q", got["id"])
	}
	if first, second := NewEventID(), NewEventID(); first == second {
		t.Errorf("event ids repeat: %q", first)
	}
}
