package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// Step is one planned action. The plan is a pure function of the seed and the duration,
// so `make chaos SEED=n` replays the same actions at the same offsets; what the world
// answers (and so the interleaving) still varies from run to run.
type Step struct {
	N    int           `json:"n"`
	At   time.Duration `json:"at"`
	Kind string        `json:"kind"`
	ID   string        `json:"id,omitempty"`
	// Via: who each of the step's requests goes to ("a", "b", "registry"); a race sends
	// one request per entry at once. create-delete sends Via[0] a create, Via[1] a delete.
	Via    []string `json:"via,omitempty"`
	Image  string   `json:"image,omitempty"`
	Ports  string   `json:"ports,omitempty"` // "", "internal", "external"
	Reused bool     `json:"reused,omitempty"`
	// Down is how long a windowed fault lasts before it is healed.
	Down time.Duration `json:"down,omitempty"`
	// Pick chooses, when the step runs, among what exists then (which pod, container or
	// node); Fate is the image a fate sets.
	Pick uint64 `json:"pick,omitempty"`
	Fate string `json:"fate,omitempty"`
	// Proxy faults: the resource whose watches are hit, the latency added, the percent
	// of mutating answers lost (Via[0] is the replica whose proxy does it).
	Resource string        `json:"resource,omitempty"`
	Latency  time.Duration `json:"latency,omitempty"`
	Percent  int           `json:"percent,omitempty"`
	// Lag: create-cleanup sends its DELETE this long after its POST.
	Lag time.Duration `json:"lag,omitempty"`
	// ServiceType of another provider's objects (foreign).
	ServiceType string `json:"service_type,omitempty"`
}

// Operation and fault kinds.
const (
	OpCreate       = "create"
	OpCreateRace   = "create-race"
	OpCreateDelete = "create-delete"
	OpDelete       = "delete"
	OpHandDelete   = "hand-delete"
	OpGet          = "get"
	OpList         = "list"
	// DCM's habits: another provider's Deployment and Service carrying a container id
	// (foreign), and a DELETE sent right after a create, as DCM's clean-up after its
	// create timed out (create-cleanup: the POST through one replica, the DELETE Lag
	// later through the other).
	OpForeign       = "foreign"
	OpCreateCleanup = "create-cleanup"
	// A burst of fresh ids, each POSTed through one replica and DELETEd through the
	// other Lag (0-35 ms) later: a 204 must leave nothing of the id (delete-race).
	OpDeleteRace = "delete-race"

	FaultPodDelete        = "pod-delete"
	FaultFate             = "fate"
	FaultNodeLoss         = "node-loss"
	FaultNATSRestart      = "nats-restart"
	FaultLeaderKill       = "leader-kill"
	FaultReplicaStop      = "replica-stop"
	FaultRegistryRestart  = "registry-restart"
	FaultAPIServerRestart = "apiserver-restart"

	// Faults of one replica's proxy to the apiserver (proxy.go).
	FaultWatchBlock = "watch-block" // its watches of one resource go silent, new ones hang
	FaultWatchBreak = "watch-break" // its watches of one resource are cut, new ones refused
	FaultAPIDelay   = "api-delay"   // every answer but a watch's comes Latency late
	FaultAPIDrop    = "api-drop"    // Percent of its mutating requests act, their answer is lost
)

// proxyFaults run one at a time in their own lane, beside the window faults (a
// replica's watch lagging during an apiserver restart is a case too).
var proxyFaults = []string{FaultWatchBlock, FaultWatchBreak, FaultAPIDelay, FaultAPIDrop}

// watchedResources are what the service watches, each a proxy fault's possible target.
var watchedResources = []string{"deployments", "pods", "services", "configmaps"}

// foreignTypes are DCM's other providers' service types.
var foreignTypes = []string{"database", "network"}

// windowFaults take something away for a while; they run one at a time, so each one's
// effect (and its recovery) can be told apart, and never both replicas are down at once.
var windowFaults = []string{FaultNodeLoss, FaultNATSRestart, FaultLeaderKill, FaultReplicaStop, FaultRegistryRestart, FaultAPIServerRestart}

// IsFault tells faults from operations.
func IsFault(kind string) bool {
	switch kind {
	case FaultPodDelete, FaultFate:
		return true
	}
	return slices.Contains(windowFaults, kind) || slices.Contains(proxyFaults, kind)
}

// Images. The fate images make kwok play a crash loop, an OOM loop or an image that
// cannot be pulled (harness/fates.go); anything else runs.
const normalImage = "quay.io/example/app:v1"

var fateImages = []string{harness.FateCrashLoopBackOff + ":v1", harness.FateOOMKilled + ":v1", harness.FateImagePullBackOff + ":v1"}

// Nodes of the world (harness.Options.Nodes = 2).
var nodeNames = []string{harness.NodeName, "kwok-node-1"}

// Plan makes the schedule for seed and duration d.
func Plan(seed uint64, d time.Duration) []Step {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := &planner{r: r, live: map[string]bool{}}

	// Window faults first (their times do not depend on the operations), one at a time:
	// every kind once (in a seeded order) before any repeats, so a short run still sees
	// each.
	var faults []Step
	order := append([]string(nil), windowFaults...)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for t, i := 8*time.Second, 0; ; i++ {
		kind := windowFaults[r.IntN(len(windowFaults))]
		if i < len(order) {
			kind = order[i]
		}
		s := Step{At: t, Kind: kind, Pick: r.Uint64()}
		switch kind {
		case FaultNodeLoss:
			s.Down = p.between(8, 20)
		case FaultNATSRestart:
			s.Down = p.between(4, 12)
		case FaultLeaderKill:
			s.Down = p.between(2, 6)
		case FaultReplicaStop:
			s.Down = p.between(4, 12)
		case FaultRegistryRestart:
			s.Down = p.between(3, 8)
		case FaultAPIServerRestart:
			s.Down = p.between(4, 10)
		}
		if t+s.Down > d-3*time.Second {
			break
		}
		faults = append(faults, s)
		// After a crash the other replica takes over only when its hold on the lock expires (about
		// 15 s): leave room so the next fault does not land on a world still failing over.
		after := p.between(4, 10)
		switch kind {
		case FaultLeaderKill:
			after += 12 * time.Second
		case FaultAPIServerRestart: // its restart takes a few seconds more than Down
			after += 6 * time.Second
		}
		t += s.Down + after
	}
	// Inside every window a burst of changes (deletes, hand deletes, creates), so each
	// fault meets work in flight: a NATS outage with nothing to report tests nothing.
	var bursts []time.Duration
	for _, f := range faults {
		for range 3 + r.IntN(3) {
			bursts = append(bursts, f.At+300*time.Millisecond+time.Duration(r.Int64N(int64(max(f.Down-time.Second, time.Second)))))
		}
	}
	sort.Slice(bursts, func(i, j int) bool { return bursts[i] < bursts[j] })

	steps := faults
	// A population to disturb before the first fault.
	for i := range 6 {
		steps = append(steps, p.create(time.Duration(i)*500*time.Millisecond, []string{"a", "b"}[i%2], false))
	}
	// Operations, about one a second, bursty (exponential gaps), plus the bursts.
	for t := 4 * time.Second; t < d; t += p.gap(900*time.Millisecond, 50*time.Millisecond, 3*time.Second) {
		for len(bursts) > 0 && bursts[0] < t {
			steps = append(steps, p.change(bursts[0]))
			bursts = bursts[1:]
		}
		steps = append(steps, p.operation(t))
	}
	for _, b := range bursts {
		steps = append(steps, p.change(b))
	}
	// Pod deletions and fates, independent of everything else.
	for t := 6 * time.Second; t < d; t += p.gap(12*time.Second, 2*time.Second, 30*time.Second) {
		steps = append(steps, Step{At: t, Kind: FaultPodDelete, Pick: r.Uint64()})
	}
	for t := 10 * time.Second; t < d; t += p.gap(20*time.Second, 3*time.Second, 40*time.Second) {
		steps = append(steps, Step{At: t, Kind: FaultFate, Pick: r.Uint64(), Fate: fateImages[r.IntN(len(fateImages))]})
	}

	steps = append(steps, planHabits(seed, d, steps)...)
	steps = append(steps, planDeleteRaces(seed, d)...)

	sort.SliceStable(steps, func(i, j int) bool { return steps[i].At < steps[j].At })
	for i := range steps {
		steps[i].N = i + 1
	}
	return steps
}

// planner keeps the plan's own idea of which ids exist, so deletes mostly aim at
// containers that were created (the real answers decide; a 404 is fine too).
type planner struct {
	r       *rand.Rand
	n       int
	ids     []string
	live    map[string]bool
	viaReg  []string // ids created through the registry, which only it can delete
	liveIDs []string
}

func (p *planner) gap(mean, lo, hi time.Duration) time.Duration {
	g := time.Duration(p.r.ExpFloat64() * float64(mean))
	return min(max(g, lo), hi)
}

func (p *planner) between(lo, hi int) time.Duration {
	return time.Duration(lo*1000+p.r.IntN((hi-lo)*1000+1)) * time.Millisecond
}

func (p *planner) fresh() string {
	p.n++
	id := fmt.Sprintf("c-%03d", p.n)
	p.ids = append(p.ids, id)
	return id
}

func (p *planner) reused() string { return p.ids[p.r.IntN(len(p.ids))] }

func (p *planner) image() string {
	if p.r.IntN(100) < 85 {
		return normalImage
	}
	return fateImages[p.r.IntN(len(fateImages))]
}

func (p *planner) ports() string {
	switch n := p.r.IntN(10); {
	case n < 5:
		return "internal"
	case n < 7:
		return "external"
	}
	return ""
}

func (p *planner) replica() string { return []string{"a", "b"}[p.r.IntN(2)] }

// other is the replica that is not via.
func other(via string) string { return map[string]string{"a": "b", "b": "a"}[via] }

func (p *planner) create(at time.Duration, via string, reuse bool) Step {
	id := ""
	if reuse && len(p.ids) > 0 {
		id = p.reused()
	} else {
		id, reuse = p.fresh(), false
	}
	p.setLive(id, true)
	if via == "registry" {
		p.viaReg = append(p.viaReg, id)
	}
	return Step{At: at, Kind: OpCreate, ID: id, Via: []string{via}, Image: p.image(), Ports: p.ports(), Reused: reuse}
}

func (p *planner) setLive(id string, live bool) {
	if p.live[id] == live {
		return
	}
	p.live[id] = live
	p.liveIDs = p.liveIDs[:0]
	for _, x := range p.ids {
		if p.live[x] {
			p.liveIDs = append(p.liveIDs, x)
		}
	}
}

// victim is a container the plan believes exists (any id if none).
func (p *planner) victim() string {
	if len(p.liveIDs) > 0 {
		return p.liveIDs[p.r.IntN(len(p.liveIDs))]
	}
	return p.reused()
}

// change is a burst operation: something that changes a container's state.
func (p *planner) change(t time.Duration) Step {
	switch w := p.r.IntN(10); {
	case w < 4:
		id := p.victim()
		p.setLive(id, false)
		return Step{At: t, Kind: OpDelete, ID: id, Via: []string{p.replica()}}
	case w < 6:
		id := p.victim()
		p.setLive(id, false)
		return Step{At: t, Kind: OpHandDelete, ID: id, Via: []string{"kubectl"}}
	}
	return p.create(t, p.replica(), false)
}

func (p *planner) operation(t time.Duration) Step {
	w := p.r.IntN(100)
	switch {
	case w < 26: // a fresh id through either replica
		return p.create(t, p.replica(), false)
	case w < 34: // an id used before, on purpose (a 409 while it lives)
		return p.create(t, p.replica(), true)
	case w < 42: // two or three creates of one id at once, across replicas
		s := p.create(t, p.replica(), p.r.IntN(2) == 0)
		s.Kind = OpCreateRace
		s.Via = []string{"a", "b"}
		if p.r.IntN(3) == 0 {
			s.Via = append(s.Via, p.replica())
		}
		return s
	case w < 46: // a create and a delete of one id at once
		s := p.create(t, p.replica(), true)
		s.Kind = OpCreateDelete
		s.Via = []string{p.replica(), p.replica()}
		return s
	case w < 51: // through DCM: the registry forwards to a replica behind the endpoint
		return p.create(t, "registry", p.r.IntN(4) == 0)
	case w < 54:
		if len(p.viaReg) == 0 {
			break
		}
		id := p.viaReg[p.r.IntN(len(p.viaReg))]
		p.setLive(id, false)
		return Step{At: t, Kind: OpDelete, ID: id, Via: []string{"registry"}}
	case w < 74:
		id := p.victim()
		p.setLive(id, false)
		return Step{At: t, Kind: OpDelete, ID: id, Via: []string{p.replica()}}
	case w < 80: // kubectl delete deployment
		id := p.victim()
		p.setLive(id, false)
		return Step{At: t, Kind: OpHandDelete, ID: id, Via: []string{"kubectl"}}
	case w < 94:
		return Step{At: t, Kind: OpGet, ID: p.reused(), Via: []string{p.replica()}}
	}
	return Step{At: t, Kind: OpList, Via: []string{p.replica()}}
}

// planHabits adds the issue-23 lanes: proxy faults, other providers' objects and DCM's
// clean-up deletes. They draw from their own random stream, so the steps a seed planned
// before them are still the same steps (a seed logged as finding a bug replays the same
// schedule, with these on top); their ids (d-NNN) are their own too.
func planHabits(seed uint64, d time.Duration, planned []Step) []Step {
	r := rand.New(rand.NewPCG(seed^0x6a09e667f3bcc908, seed+0xbb67ae8584caa73b))
	p := &planner{r: r}
	var steps []Step

	// Proxy faults: every kind once (in a seeded order) before any repeats.
	order := slices.Clone(proxyFaults)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for t, i := 5*time.Second, 0; ; i++ {
		kind := proxyFaults[r.IntN(len(proxyFaults))]
		if i < len(order) {
			kind = order[i]
		}
		s := Step{At: t, Kind: kind, Via: []string{p.replica()}, Down: p.between(3, 12), Pick: r.Uint64()}
		switch kind {
		case FaultWatchBlock, FaultWatchBreak:
			s.Resource = watchedResources[r.IntN(len(watchedResources))]
		case FaultAPIDelay:
			s.Latency = time.Duration(100+r.IntN(1400)) * time.Millisecond
		case FaultAPIDrop:
			s.Percent = 10 + r.IntN(41)
		}
		if t+s.Down > d-3*time.Second {
			break
		}
		steps = append(steps, s)
		t += s.Down + p.between(2, 8)
	}

	// Ids the plan creates, by the time each is first created.
	type planned1 struct {
		id string
		at time.Duration
	}
	var ids []planned1
	seen := map[string]bool{}
	sorted := slices.Clone(planned)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].At < sorted[j].At })
	for _, s := range sorted {
		if s.ID != "" && !seen[s.ID] && (s.Kind == OpCreate || s.Kind == OpCreateRace || s.Kind == OpCreateDelete) {
			seen[s.ID] = true
			ids = append(ids, planned1{s.ID, s.At})
		}
	}
	// Another provider's objects with ids the run uses: two at the start (ids created
	// in the first seconds), then one now and then, on an id created by then.
	foreign := func(at time.Duration, id string) {
		steps = append(steps, Step{At: at, Kind: OpForeign, ID: id, Via: []string{"kubectl"}, ServiceType: foreignTypes[r.IntN(len(foreignTypes))]})
	}
	for i := 0; i < 2 && i < len(ids); i++ {
		foreign(100*time.Millisecond, ids[r.IntN(min(len(ids), 6))].id)
	}
	for t := 15 * time.Second; t < d; t += p.gap(25*time.Second, 10*time.Second, 45*time.Second) {
		var known []string
		for _, x := range ids {
			if x.at < t {
				known = append(known, x.id)
			}
		}
		if len(known) > 0 {
			foreign(t, known[r.IntN(len(known))])
		}
	}

	// DCM's clean-up: a fresh id created through one replica and deleted through the
	// other 0-50 ms after the POST was sent, every 8 s or so.
	n := 0
	for t := 3 * time.Second; t < d; t += p.gap(8*time.Second, 2*time.Second, 20*time.Second) {
		n++
		via := p.replica()
		steps = append(steps, Step{At: t, Kind: OpCreateCleanup, ID: fmt.Sprintf("d-%03d", n), Via: []string{via, other(via)},
			Image: normalImage, Ports: p.ports(), Lag: time.Duration(r.IntN(51)) * time.Millisecond})
	}
	return steps
}

// deleteRacePrefix starts the ids of the delete-race lane.
const deleteRacePrefix = "r-"

// planDeleteRaces adds the delete-race lane: every 12 s or so a burst of four fresh ids,
// each created through one replica and deleted through the other 0-35 ms later. It draws
// from a random stream of its own, so every step planned before it stays the same.
func planDeleteRaces(seed uint64, d time.Duration) []Step {
	r := rand.New(rand.NewPCG(seed^0x3c6ef372fe94f82b, seed+0xa54ff53a5f1d36f1))
	p := &planner{r: r}
	var steps []Step
	n := 0
	for t := 5 * time.Second; t < d-5*time.Second; t += p.gap(12*time.Second, 4*time.Second, 25*time.Second) {
		for range 4 {
			n++
			via := p.replica()
			steps = append(steps, Step{At: t, Kind: OpDeleteRace, ID: fmt.Sprintf("%s%03d", deleteRacePrefix, n),
				Via: []string{via, other(via)}, Image: normalImage, Ports: "internal",
				Lag: time.Duration(r.IntN(36)) * time.Millisecond})
		}
	}
	return steps
}
