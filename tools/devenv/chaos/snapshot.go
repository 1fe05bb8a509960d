package chaos

import (
	"bufio"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Snapshot captures the world at rest as plain data for the checks: the container
// objects, the registry's instances, each replica's LIST, how many replicas lead, and
// the panics in every log.
func (w *World) Snapshot(ctx context.Context) Final {
	f, err := w.objects(ctx)
	if err != nil {
		f.Unsettled = append(f.Unsettled, "cluster: "+err.Error())
	}
	f.Time = time.Now()
	f.Registry, err = w.registryInstances(ctx)
	if err != nil {
		f.RegistryErr = err.Error()
	}
	if w.Rec != nil {
		if c, err := w.Rec.Consumer(ctx, registryConsumer); err == nil {
			f.RegistryConsumer = &c
		}
	}
	f.Views = map[string]map[string]APIView{}
	for _, name := range []string{"a", "b"} {
		r := w.Replicas[name]
		proc, u := r.Current()
		if !r.Up() {
			continue
		}
		if v, err := w.listViews(ctx, u); err == nil {
			f.Views[proc] = v
		}
	}
	f.Leaders = w.Leaders()
	f.Panics = scanLogs(w.Dir)
	return f
}

// registryInstances lists every instance the registry keeps: id -> status.
func (w *World) registryInstances(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	token := ""
	for {
		var page struct {
			Instances []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"instances"`
			Next string `json:"next_page_token"`
		}
		u := w.Registry.URL + "/service-type-instances?max_page_size=100"
		if token != "" {
			u += "&page_token=" + url.QueryEscape(token)
		}
		if err := w.getJSON(ctx, u, &page); err != nil {
			return out, err
		}
		for _, i := range page.Instances {
			out[i.ID] = i.Status
		}
		if page.Next == "" {
			return out, nil
		}
		token = page.Next
	}
}

// panicLine matches what a panic leaves in a log: the runtime's own "panic:" and
// "fatal error:", the service's recovered "panic serving request", client-go's
// "Observed a panic".
var panicLine = regexp.MustCompile(`^panic: |^fatal error: |"msg":"panic|Observed a panic|"panic":`)

// scanLogs returns, per log in dir (the service processes', the registry's), its panic
// lines (at most 5).
func scanLogs(dir string) map[string][]string {
	out := map[string][]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "service-*.log"))
	files = append(files, filepath.Join(dir, "registry", "registry.log"))
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if panicLine.Match(sc.Bytes()) && len(out[filepath.Base(path)]) < 5 {
				line := sc.Text()
				if len(line) > 500 {
					line = line[:500] + "…"
				}
				out[filepath.Base(path)] = append(out[filepath.Base(path)], line)
			}
		}
		f.Close()
	}
	return out
}
