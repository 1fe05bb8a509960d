package bench

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"time"
)

// auditedReads counts the apiserver's audit lines (harness Options.AuditReads: GET and
// LIST of Deployments, Pods and Services) completed between from and to, by client
// ("kube-apiserver LIST services"): the client is the first word of its user agent.
// The apiserver's request counter tells how many, this tells who.
func auditedReads(path string, from, to time.Time) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev struct {
			Stage          string    `json:"stage"`
			Verb           string    `json:"verb"`
			UserAgent      string    `json:"userAgent"`
			StageTimestamp time.Time `json:"stageTimestamp"`
			ObjectRef      struct {
				Resource string `json:"resource"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" ||
			ev.StageTimestamp.Before(from) || ev.StageTimestamp.After(to) {
			continue
		}
		client, _, _ := strings.Cut(ev.UserAgent, "/")
		out[client+" "+strings.ToUpper(ev.Verb)+" "+ev.ObjectRef.Resource]++
	}
	return out, sc.Err()
}
