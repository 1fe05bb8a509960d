package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Every Kubernetes call has a deadline, except watches: rest.Config.Timeout used to cut
// every informer watch after 15 s.
func TestPerCallDeadlineSparesWatches(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond) // a slow answer, or a watch streaming events
		_, _ = w.Write([]byte("done"))
	}))
	defer srv.Close()
	client := &http.Client{Transport: withPerCallDeadline(100 * time.Millisecond)(http.DefaultTransport)}
	get := func(query string) (string, error) {
		resp, err := client.Get(srv.URL + "/apis/apps/v1/deployments" + query)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get("?watch=true"); err != nil || body != "done" {
		t.Errorf("watch: %q %v, want it left alone", body, err)
	}
	if body, err := get("?limit=500"); err == nil {
		t.Errorf("list: %q, want the deadline to cut it", body)
	}
}
