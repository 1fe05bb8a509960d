package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MissingResult is what a GET of an id the replica does not know costs. Its cache
// cannot tell "not created" from "created by the other replica a moment ago", so the
// service reads the id's record from the apiserver before answering 404 (an
// authoritative 404), through a client of its own limited to 20 requests/s, burst 40.
type MissingResult struct {
	Containers int `json:"containers"`
	// Unknown: sequential GETs of unknown ids, fewer than the limiter's burst;
	// Known: GETs of existing ids interleaved with them (answered from the cache).
	Unknown Dist `json:"get_unknown"`
	Known   Dist `json:"get_known"`
	// Confirmations: the service's own Kubernetes GETs answered 404 per unknown GET.
	ConfirmsPerGet float64 `json:"confirmations_per_unknown_get"`
	// APIServerLeaseGets: the apiserver's GETs of ConfigMaps in the phase (the records,
	// and the replicas' leader-election reads of their lock), every client. (Named when
	// records were Leases; the JSON name is kept so earlier results still read.)
	APIServerLeaseGets float64 `json:"apiserver_lease_gets"`
	// Flood: 8 clients asking for unknown ids for FloodSeconds: answers/s, their
	// latency, and the confirmations the apiserver saw per second (the limiter's bound).
	FloodSeconds      float64 `json:"flood_s"`
	FloodAnswersPerS  float64 `json:"flood_answers_per_s"`
	FloodLatency      Dist    `json:"flood_latency"`
	FloodConfirmsPerS float64 `json:"flood_confirmations_per_s"`
	FloodNon404       int     `json:"flood_non_404_answers"`
}

var labelCode = regexp.MustCompile(`code="([^"]*)"`)

// sumOf adds up the samples of one metric whose labels keep accepts.
func sumOf(m map[string]float64, metric string, keep func(labels string) bool) float64 {
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, metric+"{") && keep(k) {
			n += v
		}
	}
	return n
}

// labelIs reports whether a sample's labels hold label=value.
func labelIs(labels string, re *regexp.Regexp, value string) bool {
	m := re.FindStringSubmatch(labels)
	return m != nil && m[1] == value
}

// confirmations is the service's count of Kubernetes GETs answered 404: the cache-miss
// confirmations (nothing else it does reads a missing object).
func confirmations(m map[string]float64) float64 {
	return sumOf(m, "sp_kubernetes_requests_total", func(l string) bool {
		return labelIs(l, labelMethod, http.MethodGet) && labelIs(l, labelCode, "404")
	})
}

func recordGets(m map[string]float64) float64 {
	return sumOf(m, "apiserver_request_total", func(l string) bool {
		return labelIs(l, labelVerb, "GET") && labelIs(l, labelResource, "configmaps")
	})
}

// Missing measures GETs of unknown ids on s (ids are existing containers, for the
// interleaved known GETs).
func (e *Env) Missing(ctx context.Context, s *Service, ids []string) (MissingResult, error) {
	res := MissingResult{Containers: len(ids)}
	count := func() (float64, float64, error) {
		sm, err := s.Metrics()
		if err != nil {
			return 0, 0, err
		}
		am, err := e.APIServerMetrics(ctx)
		if err != nil {
			return 0, 0, err
		}
		return confirmations(sm), recordGets(am), nil
	}
	time.Sleep(3 * time.Second) // the limiter's bucket full again (20/s, 40)
	c0, l0, err := count()
	if err != nil {
		return res, err
	}
	const tries = 30 // under the burst: none waits for the limiter
	var unknown, known []time.Duration
	for i := range tries {
		start := time.Now()
		code, body, err := s.do(http.MethodGet, fmt.Sprintf("/api/v1alpha1/containers/missing-%04d", i), nil)
		if err != nil {
			return res, err
		}
		if code != http.StatusNotFound {
			return res, fmt.Errorf("GET of an unknown id: %d %s", code, body)
		}
		unknown = append(unknown, time.Since(start))
		d, _, err := s.get("/api/v1alpha1/containers/" + ids[rand.IntN(len(ids))])
		if err != nil {
			return res, err
		}
		known = append(known, d)
	}
	c1, l1, err := count()
	if err != nil {
		return res, err
	}
	res.Unknown, res.Known = summarize(unknown), summarize(known)
	res.ConfirmsPerGet = (c1 - c0) / tries
	res.APIServerLeaseGets = l1 - l0

	const flood = 3 * time.Second
	var answered atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	deadline := time.Now().Add(flood)
	err = parallel(8, 0, 8, func(w int) error {
		for i := 0; time.Now().Before(deadline); i++ {
			start := time.Now()
			code, _, err := s.do(http.MethodGet, fmt.Sprintf("/api/v1alpha1/containers/flood-%d-%06d", w, i), nil)
			if err != nil {
				return err
			}
			d := time.Since(start)
			mu.Lock()
			lat = append(lat, d)
			if code != http.StatusNotFound {
				res.FloodNon404++
			}
			mu.Unlock()
			answered.Add(1)
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	c2, _, err := count()
	if err != nil {
		return res, err
	}
	res.FloodSeconds = flood.Seconds()
	res.FloodAnswersPerS = float64(answered.Load()) / flood.Seconds()
	res.FloodLatency = summarize(lat)
	res.FloodConfirmsPerS = (c2 - c1) / flood.Seconds()
	return res, nil
}
