package store

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dcm-project/k8s-container-sp/internal/freshness"
	"github.com/dcm-project/k8s-container-sp/internal/kubeerr"
)

// A read never answers from a cache out of date past a known bound (internal/freshness).

// SilenceBound is Store.SilenceBound unless set: a watch silent past bookmarks is behind.
const SilenceBound = freshness.SilenceBound

// DefaultMaxStaleness is Store.MaxStaleness unless set (SP_K8S_MAX_STALENESS).
const DefaultMaxStaleness = freshness.DefaultMaxStaleness

// Lag is how far behind one cache may be.
type Lag = freshness.Lag

// StaleRetryAfter is the Retry-After (seconds) of a read refused because a cache is
// behind: long enough for the informer's first retry of a failed watch.
const StaleRetryAfter = 2

// The caches, in the order they are reported.
const (
	CacheDeployments = "deployments"
	CachePods        = "pods"
	CacheServices    = "services"
	CacheRecords     = "records"
)

// Caches names every cache (the metrics label values).
var Caches = []string{CacheDeployments, CachePods, CacheServices, CacheRecords}

// cacheTitle is how a message names a cache.
var cacheTitle = map[string]string{
	CacheDeployments: "Deployments", CachePods: "Pods", CacheServices: "Services", CacheRecords: "container records",
}

// Lags reports every cache, in the order of Caches.
func (s *Store) Lags() []Lag {
	out := make([]Lag, 0, len(s.fresh))
	for _, name := range Caches {
		out = append(out, s.fresh[name].Lag(s.MaxStaleness, s.SilenceBound))
	}
	return out
}

// Lag reports one cache (a name of Caches).
func (s *Store) Lag(cache string) Lag {
	f, ok := s.fresh[cache]
	if !ok {
		return Lag{Cache: cache}
	}
	return f.Lag(s.MaxStaleness, s.SilenceBound)
}

// Behind lists the caches that are behind (none when all are current).
func (s *Store) Behind() []Lag {
	return slices.DeleteFunc(s.Lags(), func(l Lag) bool { return !l.Behind })
}

// readCaches serve GET and LIST; a miss reads the record itself, so records is not one.
var readCaches = []string{CacheDeployments, CachePods, CacheServices}

// checkFresh refuses a read when a cache it needs is behind: a 503 naming the cache,
// since a 200 from it could show a container as it was before the cache broke.
func (s *Store) checkFresh() error {
	var names []string
	var worst Lag
	for _, name := range readCaches {
		l := s.fresh[name].Lag(s.MaxStaleness, s.SilenceBound)
		if !l.Behind {
			continue
		}
		names = append(names, cacheTitle[name])
		if l.For > worst.For {
			worst = l
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &kubeerr.Error{Kind: kubeerr.KindUnavailable, RetryAfter: StaleRetryAfter, Err: fmt.Errorf("stale cache: %s", worst),
		Message: fmt.Sprintf("this replica's view of %s has been out of date for %d s; retry later (another replica may answer)",
			strings.Join(names, " and "), int(worst.For.Seconds()))}
}
