package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness"
)

// The checks are pure: they read the history, the stream and the world at rest, nothing
// else, so they can be tested with hand-made tables (check_test.go) and re-run on a
// finished run (sp-chaos -recheck DIR).

// Input is everything the checks read.
type Input struct {
	Run     RunInfo `json:"run"`
	History []Entry `json:"-"`
	Events  []Event `json:"-"`
	Final   Final   `json:"-"`
}

// Result is one invariant's verdict.
type Result struct {
	Name       string      `json:"name"`
	What       string      `json:"what"`
	OK         bool        `json:"ok"`
	Checked    int         `json:"checked"`
	Violations []Violation `json:"violations,omitempty"`
}

// Violation is one breach, with the lines of history and stream that show it.
type Violation struct {
	ID      string   `json:"id,omitempty"`
	What    string   `json:"what"`
	Excerpt []string `json:"excerpt,omitempty"`
}

// Tolerances.
const (
	// apiserverGrace: after the apiserver is back, how long 503s are still expected. A
	// replica's informers reconnect on client-go's reflector backoff, which after a
	// long outage waits [30, 60) s between attempts (tools/cache/reflector.go,
	// defaultBackoffMax 30 s, jitter 1.0); until then its cache is behind and a read it
	// cannot confirm answers 503 (seed 11 saw one 21 s after the apiserver came back).
	apiserverGrace = 60 * time.Second
	// freeGrace: a record is released a moment after its DELETED is stored; a 409 in
	// that moment is not a false one.
	freeGrace = 2 * time.Second
	// Growth allowed between a process's warm sample and its last one.
	goroutineGrowth = 1.25
	goroutineSlack  = 30
	rssGrowth       = 1.5
	rssSlack        = 64 << 20
	// warmAfter: a process's first sample this long after it was ready is its baseline;
	// minLife: shorter-lived processes are not judged.
	warmAfter = 15 * time.Second
	minLife   = 60 * time.Second
	// proxyWatchGrace: after a replica's watches were blocked or broken, its reflectors
	// reconnect on the same backoff as after an apiserver outage; proxyAPIGrace: after
	// delayed or lost answers, a request begun in the fault may still fail a little
	// after it.
	proxyWatchGrace = apiserverGrace
	proxyAPIGrace   = 10 * time.Second
	// eventSlack: a status already on its way to the stream when a DELETE answered
	// may land a moment after it.
	eventSlack = 2 * time.Second
	// arrivalSlack: a create sent less than this before a DELETE through the other
	// replica may reach the service after the DELETE; the DELETE may then truly come
	// first, and the create may make the container anew.
	arrivalSlack = 5 * time.Millisecond
	// stalenessSlack is added to the replicas' staleness bound: the answer's own
	// time on the wire and the cache's notice of a failed watch.
	stalenessSlack = 2 * time.Second
)

// Check runs every invariant.
func Check(in Input) []Result {
	x := index(in)
	return []Result{
		x.oneContainerPerID(),
		x.duplicatesGet409(),
		x.notFoundOnlyWhenAbsent(),
		x.existenceMatchesHistory(),
		x.lastEventIsTruth(),
		x.streamAgreesWithAPI(),
		x.nothingAfterDeleted(),
		x.registryIsTruth(),
		x.noServerErrors(),
		x.noPanicsOrCrashes(),
		x.noOrphans(),
		x.oneLeaderAtRest(),
		x.noGrowth(),
		x.recovered(),
		x.cameToRest(),
		x.foreignUntouched(),
		x.serviceWhenAsked(),
		x.deletedStaysGone(),
		x.noStaleOK(),
		x.deletedMeansDeleted(),
	}
}

// indexed is the input arranged per container id.
type indexed struct {
	in      Input
	ops     map[string][]Entry // per id, by start
	events  map[string][]Event // per id, by stream sequence
	deleted map[string][]time.Time
	live    map[string]Object // live Deployment per id
	ids     []string
}

func index(in Input) *indexed {
	x := &indexed{in: in, ops: map[string][]Entry{}, events: map[string][]Event{}, deleted: map[string][]time.Time{}, live: map[string]Object{}}
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			x.ids = append(x.ids, id)
		}
	}
	for _, e := range in.History {
		if e.Type == "op" && e.ID != "" {
			x.ops[e.ID] = append(x.ops[e.ID], e)
			add(e.ID)
		}
	}
	for id := range x.ops {
		sort.SliceStable(x.ops[id], func(i, j int) bool { return x.ops[id][i].Start.Before(x.ops[id][j].Start) })
	}
	evs := slices.Clone(in.Events)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Seq < evs[j].Seq })
	for _, e := range evs {
		x.events[e.ID] = append(x.events[e.ID], e)
		if e.Status == "DELETED" {
			x.deleted[e.ID] = append(x.deleted[e.ID], e.Time)
		}
		add(e.ID)
	}
	for _, d := range in.Final.Deployments {
		if !d.Deleting {
			x.live[d.ID] = d
		}
		add(d.ID)
	}
	sort.Strings(x.ids)
	return x
}

// effect says whether an answered operation changed the world: yes, no, or maybe (no
// definite answer: a timeout, a crash mid-request, a 5xx).
type effect int

const (
	no effect = iota
	maybe
	yes
)

func opEffect(e Entry) effect {
	if e.Refused {
		return no
	}
	switch e.Kind {
	case OpCreate:
		switch {
		case e.Code == 201:
			return yes
		case e.Via == "registry" && e.Code == 422: // the provider failed or timed out
			return maybe
		case e.Code >= 400 && e.Code < 500:
			return no
		}
		return maybe
	case OpDelete:
		switch {
		case e.Code == 204 || e.Code == 200:
			return yes
		case e.Via == "registry" && e.Code == 422:
			return maybe
		case e.Code >= 400 && e.Code < 500:
			return no
		}
		return maybe
	case OpHandDelete:
		switch {
		case e.Count > 0:
			return yes
		case e.Err == "":
			return no
		}
		return maybe
	}
	return no
}

func isCreate(e Entry) bool { return e.Kind == OpCreate }
func isDelete(e Entry) bool { return e.Kind == OpDelete || e.Kind == OpHandDelete }

// deletedBetween: a DELETED for id was stored in (from, to).
func (x *indexed) deletedBetween(id string, from, to time.Time) bool {
	for _, t := range x.deleted[id] {
		if t.After(from) && t.Before(to) {
			return true
		}
	}
	return false
}

// truth is what a container's last word must be: its Deployment's status, or DELETED.
func (x *indexed) truth(id string) string {
	if d, ok := x.live[id]; ok {
		return expectedStatus(d)
	}
	return "DELETED"
}

// expectedStatus is the status a live container must end with, from its Deployment:
// PENDING for a container made with an image that cannot be pulled (its only pod waits
// for it), RUNNING otherwise — also for a crash or OOM loop (the pod is Running and
// restarting, as a kubelet shows it) and for a container whose image was changed to a
// fate later (revision > 1: its old pod keeps running beside the new one).
func expectedStatus(d Object) string {
	if strings.HasPrefix(d.Image, harness.FateImagePullBackOff) && d.Revision == "1" {
		return "PENDING"
	}
	return "RUNNING"
}

// 1. Per id, at most one container at a time: of two successful creates, the second
// answered only after the first's DELETED was on the stream; at rest, one Deployment.
func (x *indexed) oneContainerPerID() Result {
	r := Result{Name: "one container per id", What: "of two creates of an id answered 201, the later one ends after a DELETED of the id reached the stream (the earlier container was gone and reported); at rest at most one Deployment and one incarnation per id"}
	for _, id := range x.ids {
		var oks []Entry
		for _, e := range x.ops[id] {
			if isCreate(e) && e.Code == 201 {
				oks = append(oks, e)
			}
		}
		sort.SliceStable(oks, func(i, j int) bool { return oks[i].End.Before(oks[j].End) })
		r.Checked += len(oks)
		for i := 1; i < len(oks); i++ {
			a, b := oks[i-1], oks[i]
			if !x.deletedBetween(id, a.Start, b.End) {
				r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("creates #%d and #%d both answered 201 with no DELETED of %s between them", a.Seq, b.Seq, id), a.Start, b.End))
			}
		}
	}
	deps, incs := map[string]int{}, map[string]map[string]bool{}
	note := func(o Object) {
		if o.ID == "" || o.Deleting {
			return
		}
		if incs[o.ID] == nil {
			incs[o.ID] = map[string]bool{}
		}
		incs[o.ID][o.Incarnation] = true
	}
	for _, d := range x.in.Final.Deployments {
		if !d.Deleting {
			deps[d.ID]++
		}
		note(d)
	}
	for _, o := range append(slices.Clone(x.in.Final.Services), x.in.Final.Pods...) {
		note(o)
	}
	for _, id := range sortedKeys(incs) {
		if deps[id] > 1 || len(incs[id]) > 1 {
			r.Violations = append(r.Violations, Violation{ID: id, What: fmt.Sprintf("at rest: %d Deployments, incarnations %v", deps[id], sortedKeys(incs[id]))})
		}
	}
	return r.done()
}

// takenThroughout: some create of id was answered 201 before from, and no DELETED of
// id was stored since that create began, up to to: the id was certainly taken.
func (x *indexed) takenThroughout(id string, from, to time.Time, except int) bool {
	for _, c := range x.ops[id] {
		if c.Seq != except && isCreate(c) && c.Code == 201 && c.End.Before(from) && !x.deletedBetween(id, c.Start, to) {
			return true
		}
	}
	return false
}

// freeThroughout: every create of id that may have made a container and began before
// to was followed by a DELETED of id stored after it answered and freeGrace before from.
func (x *indexed) freeThroughout(id string, from, to time.Time, except int) bool {
	for _, c := range x.ops[id] {
		if c.Seq == except || !isCreate(c) || opEffect(c) == no || !c.Start.Before(to) {
			continue
		}
		if !x.deletedBetween(id, c.End, from.Add(-freeGrace)) {
			return false
		}
	}
	return true
}

// 2. Every duplicate create got 409, and no create of a free id did.
func (x *indexed) duplicatesGet409() Result {
	r := Result{Name: "duplicate creates get 409", What: "a create through a replica while its id was certainly taken (an earlier 201, no DELETED since) answers 409 (or 503 in an apiserver outage, or no answer from a stopped replica); a create of an id certainly free answers anything but 409"}
	for _, id := range x.ids {
		for _, e := range x.ops[id] {
			if !isCreate(e) || e.Via == "registry" {
				continue
			}
			switch {
			case e.Code != 201 && x.takenThroughout(id, e.Start, e.End, e.Seq):
				r.Checked++
				if e.Code != 409 && !x.unavailableAllowed(e) {
					r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("#%d: a duplicate create answered %s", e.Seq, answerText(e)), e.Start, e.End))
				}
			case e.Code == 409:
				r.Checked++
				if x.freeThroughout(id, e.Start, e.End, e.Seq) {
					r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("#%d: 409 for an id no container held", e.Seq), e.Start, e.End))
				}
			}
		}
	}
	return r.done()
}

// 3. A 404 is authoritative: never for a container that certainly existed.
func (x *indexed) notFoundOnlyWhenAbsent() Result {
	r := Result{Name: "404 only for absent containers", What: "a GET or DELETE through a replica answers 404 only if the container may have been gone: never after its create answered 201 when no delete of it had begun and no DELETED of it was on the stream (on either replica)"}
	for _, id := range x.ids {
		for _, e := range x.ops[id] {
			if (e.Kind != OpGet && e.Kind != OpDelete) || e.Via == "registry" || e.Code != 404 {
				continue
			}
			r.Checked++
			for _, c := range x.ops[id] {
				if !isCreate(c) || c.Code != 201 || !c.End.Before(e.Start) || x.deletedBetween(id, c.Start, e.End) {
					continue
				}
				touched := false
				for _, d := range x.ops[id] {
					if d.Seq != e.Seq && isDelete(d) && opEffect(d) != no && d.Start.Before(e.End) && d.End.After(c.Start) {
						touched = true
					}
				}
				if !touched {
					r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("#%d: %s answered 404 though create #%d had answered 201 and nothing deleted it", e.Seq, e.Kind, c.Seq), c.Start, e.End))
					break
				}
			}
		}
	}
	return r.done()
}

// 4. No container lost, none resurrected.
func (x *indexed) existenceMatchesHistory() Result {
	r := Result{Name: "no container lost or resurrected", What: "a container whose create answered 201 and that nothing tried to delete afterwards exists at rest; one whose delete succeeded, with no create of its id begun afterwards, does not"}
	for _, id := range x.ids {
		_, live := x.live[id]
		var lastOK, lastDel *Entry
		for i := range x.ops[id] {
			e := &x.ops[id][i]
			if isCreate(*e) && e.Code == 201 && (lastOK == nil || e.End.After(lastOK.End)) {
				lastOK = e
			}
			if isDelete(*e) && opEffect(*e) == yes && (lastDel == nil || e.End.After(lastDel.End)) {
				lastDel = e
			}
		}
		if lastOK != nil {
			r.Checked++
			touched := false
			for _, d := range x.ops[id] {
				if isDelete(d) && opEffect(d) != no && d.End.After(lastOK.Start) {
					touched = true
				}
			}
			if !touched && !live {
				r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("create #%d answered 201 and nothing deleted it, but at rest it is gone", lastOK.Seq), lastOK.Start, x.in.Final.Time))
			}
		}
		if lastDel != nil {
			r.Checked++
			recreated := false
			for _, c := range x.ops[id] {
				if isCreate(c) && opEffect(c) != no && c.End.After(lastDel.Start) {
					recreated = true
				}
			}
			if !recreated && live {
				r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("delete #%d succeeded and no create followed, but at rest it exists", lastDel.Seq), lastDel.Start, x.in.Final.Time))
			}
		}
	}
	return r.done()
}

// 5. The last event of every container is its true final state.
func (x *indexed) lastEventIsTruth() Result {
	r := Result{Name: "last event is the final state", What: "for every id, the last event on the stream is its state at rest: the status its Deployment gives (RUNNING; PENDING for an image that cannot be pulled) for a live container, DELETED for one that is gone; a container that was ever created has events"}
	for _, id := range x.ids {
		evs := x.events[id]
		want := x.truth(id)
		_, live := x.live[id]
		created := slices.ContainsFunc(x.ops[id], func(e Entry) bool { return isCreate(e) && e.Code == 201 })
		if !live && !created && len(evs) == 0 {
			continue
		}
		r.Checked++
		if len(evs) == 0 {
			r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("no event at all; its final state is %s", want), time.Time{}, x.in.Final.Time))
			continue
		}
		if last := evs[len(evs)-1]; last.Status != want {
			r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("last event is %s (#%d), its final state is %s", last.Status, last.Seq, want), time.Time{}, x.in.Final.Time))
		}
	}
	return r.done()
}

// 6. At rest, what each replica's API shows is what the stream said last.
func (x *indexed) streamAgreesWithAPI() Result {
	r := Result{Name: "the stream agrees with the API", What: "at rest, every replica lists exactly the live containers, each with the status and message of its last event"}
	for _, proc := range sortedKeys(x.in.Final.Views) {
		view := x.in.Final.Views[proc]
		for _, id := range x.ids {
			v, listed := view[id]
			_, live := x.live[id]
			evs := x.events[id]
			r.Checked++
			switch {
			case listed != live:
				r.Violations = append(r.Violations, Violation{ID: id, What: fmt.Sprintf("%s lists it: %v; live at rest: %v", proc, listed, live)})
			case live && len(evs) > 0 && (evs[len(evs)-1].Status != v.Status || evs[len(evs)-1].Message != v.Message):
				last := evs[len(evs)-1]
				r.Violations = append(r.Violations, Violation{ID: id, What: fmt.Sprintf("%s shows %s %q, the last event (#%d) %s %q", proc, v.Status, v.Message, last.Seq, last.Status, last.Message)})
			}
		}
	}
	return r.done()
}

// 7. Nothing of an incarnation follows its DELETED.
func (x *indexed) nothingAfterDeleted() Result {
	r := Result{Name: "nothing after DELETED", What: "after a DELETED of an id, the next non-DELETED event of the id belongs to a new container: a create of the id was still unanswered, or began, after that DELETED was stored"}
	for _, id := range x.ids {
		evs := x.events[id]
		for i, d := range evs {
			if d.Status != "DELETED" {
				continue
			}
			r.Checked++
			for _, e := range evs[i+1:] {
				if e.Status == "DELETED" {
					continue
				}
				newer := slices.ContainsFunc(x.ops[id], func(c Entry) bool {
					return isCreate(c) && opEffect(c) != no && c.End.After(d.Time) && c.Start.Before(e.Time)
				})
				if !newer {
					r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("event #%d (%s) after DELETED #%d, with no new create of the id", e.Seq, e.Status, d.Seq), d.Time.Add(-5*time.Second), e.Time))
				}
				break
			}
		}
	}
	return r.done()
}

// 8. The registry's view equals the truth.
func (x *indexed) registryIsTruth() Result {
	r := Result{Name: "the registry's view is the truth", What: "every instance the registry lists has the final state of its container (RUNNING/PENDING, DELETED when gone); every instance created through it (201) and not deleted through it is listed"}
	if x.in.Final.RegistryErr != "" {
		r.Violations = append(r.Violations, Violation{What: "the registry could not be listed: " + x.in.Final.RegistryErr})
		return r.done()
	}
	for _, id := range x.ids {
		known := false
		for _, e := range x.ops[id] {
			if e.Via != "registry" {
				continue
			}
			if isCreate(e) && e.Code == 201 {
				known = true
			}
			if e.Kind == OpDelete && opEffect(e) == yes {
				known = false
			}
		}
		st, listed := x.in.Final.Registry[id]
		viaRegistry := slices.ContainsFunc(x.ops[id], func(e Entry) bool { return e.Via == "registry" })
		if !known && !listed && !viaRegistry {
			continue
		}
		r.Checked++
		switch {
		case !known && !listed:
			// Deleted through it (or never created there): nothing to compare.
		case known && !listed:
			r.Violations = append(r.Violations, x.violation(id, "created through the registry and not deleted through it, but the registry does not list it", time.Time{}, x.in.Final.Time))
		case st != x.truth(id) && !x.redelivered(id, st):
			what := fmt.Sprintf("the registry says %s, the final state is %s", st, x.truth(id))
			if c := x.in.Final.RegistryConsumer; c != nil {
				what += "; the registry's consumer: " + c.String()
			}
			r.Violations = append(r.Violations, x.violation(id, what, time.Time{}, x.in.Final.Time))
		}
	}
	return r.done()
}

// registryAckWait is the ack wait of the registry's JetStream consumer (JetStream's
// default: the registry sets none).
const registryAckWait = 30 * time.Second

// redelivered: the registry may hold an older event of id, status st, redelivered to
// it. The registry acks without waiting for the server's answer, so an ack lost in a
// NATS restart makes the stream deliver the event again one ack wait later, and the
// registry applies it as new, over anything since. Not the provider's: it published
// each event once, in order (docs/reports/reliability-guide.md).
func (x *indexed) redelivered(id, st string) bool {
	for _, e := range x.events[id] {
		if e.Status != st {
			continue
		}
		for _, f := range x.in.History {
			if f.Type == "fault" && f.Kind == FaultNATSRestart && !f.Start.Before(e.Time.Add(-time.Second)) && f.Start.Before(e.Time.Add(registryAckWait)) {
				return true
			}
		}
	}
	return false
}

// unavailableAllowed: a 503 during an apiserver outage (and apiserverGrace after), or
// from a replica that had not synced its caches yet; or no answer at all because the
// replica was down or going down.
func (x *indexed) unavailableAllowed(e Entry) bool {
	if e.Code == 0 {
		return true
	}
	if e.Code != 503 {
		return false
	}
	for _, f := range x.in.History {
		if f.Type == "fault" && f.Kind == FaultAPIServerRestart && e.Start.Before(f.End.Add(apiserverGrace)) && e.End.After(f.Start) {
			return true
		}
	}
	for _, f := range x.in.History {
		if f.Type != "fault" || f.Via != e.Via || !slices.Contains(proxyFaults, f.Kind) {
			continue
		}
		grace := proxyAPIGrace
		if f.Kind == FaultWatchBlock || f.Kind == FaultWatchBreak {
			grace = proxyWatchGrace
		}
		if e.Start.Before(f.End.Add(grace)) && e.End.After(f.Start) {
			return true
		}
	}
	var started time.Time
	for _, p := range x.in.History {
		if p.Type == "proc" && p.Proc == e.Proc {
			switch p.Kind {
			case "started":
				started = p.Start
			case "ready":
				if !started.IsZero() && e.Start.Before(p.End) {
					return true
				}
			}
		}
	}
	return false
}

// 9. No 5xx but a 503 in an apiserver outage.
func (x *indexed) noServerErrors() Result {
	r := Result{Name: "no 5xx but 503 in an apiserver outage", What: "no answer of a replica is a 5xx, except 503 while the apiserver is down (and 60 s after: client-go's watch backoff), while that replica's proxy blocks or breaks its watches (and 60 s after) or delays or loses its answers (and 10 s after), or while that replica's caches are still loading"}
	for _, e := range x.in.History {
		if e.Type != "op" || e.Via == "registry" || e.Via == "kubectl" {
			continue
		}
		r.Checked++
		if e.Code >= 500 && !x.unavailableAllowed(e) {
			r.Violations = append(r.Violations, x.violation(e.ID, fmt.Sprintf("#%d %s via %s (%s) answered %s", e.Seq, e.Kind, e.Via, e.Proc, answerText(e)), e.Start.Add(-2*time.Second), e.End))
		}
	}
	return r.done()
}

// 10. No panic in any log, no replica that died by itself.
func (x *indexed) noPanicsOrCrashes() Result {
	r := Result{Name: "no panic, no crash", What: "no log shows a panic; no service process ended without the run stopping it"}
	for _, file := range sortedKeys(x.in.Final.Panics) {
		r.Violations = append(r.Violations, Violation{What: "panic in " + file, Excerpt: x.in.Final.Panics[file]})
	}
	for _, e := range x.in.History {
		if e.Type == "proc" {
			r.Checked++
			if e.Kind == "exited" {
				r.Violations = append(r.Violations, Violation{What: fmt.Sprintf("%s exited on its own: %s", e.Proc, e.Err)})
			}
		}
	}
	return r.done()
}

// 11. No orphans.
func (x *indexed) noOrphans() Result {
	r := Result{Name: "no orphans", What: "at rest every Service, pod and record belongs to a live Deployment of the same id and incarnation, every Deployment has its record, nothing is terminating or holds a finalizer, and no record still owes a DELETED"}
	f := x.in.Final
	deps := map[string]bool{}
	for _, d := range f.Deployments {
		r.Checked++
		if d.Deleting || len(d.Finalizers) > 0 {
			r.Violations = append(r.Violations, Violation{ID: d.ID, What: fmt.Sprintf("Deployment %s stuck: terminating %v, finalizers %v", d.Name, d.Deleting, d.Finalizers)})
		}
		if !d.Deleting {
			deps[d.ID+"/"+d.Incarnation] = true
		}
	}
	records := map[string]bool{}
	for _, l := range f.Records {
		r.Checked++
		records[l.ID+"/"+l.Incarnation] = true
		switch {
		case l.Deleting:
			r.Violations = append(r.Violations, Violation{ID: l.ID, What: fmt.Sprintf("record %s still owes a DELETED (terminating, finalizers %v)", l.Name, l.Finalizers)})
		case !slices.Equal(l.Finalizers, []string{container.RecordFinalizer}):
			// A live record carries the finalizer from its create on, and only it.
			r.Violations = append(r.Violations, Violation{ID: l.ID, What: fmt.Sprintf("record %s has finalizers %v, not %s", l.Name, l.Finalizers, container.RecordFinalizer)})
		case !deps[l.ID+"/"+l.Incarnation]:
			r.Violations = append(r.Violations, Violation{ID: l.ID, What: fmt.Sprintf("record %s (incarnation %s) has no Deployment", l.Name, l.Incarnation)})
		}
	}
	for _, d := range f.Deployments {
		if !d.Deleting && !records[d.ID+"/"+d.Incarnation] {
			r.Violations = append(r.Violations, Violation{ID: d.ID, What: fmt.Sprintf("Deployment %s has no record", d.Name)})
		}
	}
	for kind, objs := range map[string][]Object{"Service": f.Services, "pod": f.Pods} {
		for _, o := range objs {
			r.Checked++
			if o.Deleting {
				r.Violations = append(r.Violations, Violation{ID: o.ID, What: fmt.Sprintf("%s %s still terminating", kind, o.Name)})
			} else if !deps[o.ID+"/"+o.Incarnation] {
				r.Violations = append(r.Violations, Violation{ID: o.ID, What: fmt.Sprintf("%s %s (incarnation %s) has no Deployment", kind, o.Name, o.Incarnation)})
			}
		}
	}
	sort.SliceStable(r.Violations, func(i, j int) bool { return r.Violations[i].What < r.Violations[j].What })
	return r.done()
}

// 12. Exactly one publisher at rest.
func (x *indexed) oneLeaderAtRest() Result {
	r := Result{Name: "one publisher at rest", What: "at rest exactly one replica holds the leader lock and publishes", Checked: 1}
	if x.in.Final.Leaders != 1 {
		r.Violations = append(r.Violations, Violation{What: fmt.Sprintf("%d replicas lead", x.in.Final.Leaders)})
	}
	return r.done()
}

// 13. No goroutine or memory growth.
func (x *indexed) noGrowth() Result {
	r := Result{Name: "no goroutine or memory growth", What: fmt.Sprintf("for every service process that lived at least %s after warming up (%s after ready), its goroutines at the end are at most %.2fx+%d and its RSS at most %.1fx+%d MiB of the warm sample", minLife, warmAfter, goroutineGrowth, goroutineSlack, rssGrowth, rssSlack>>20)}
	for _, g := range Growths(x.in.History) {
		if !g.Judged {
			continue
		}
		r.Checked++
		if g.GoroutinesEnd > g.GoroutinesStart*goroutineGrowth+goroutineSlack {
			r.Violations = append(r.Violations, Violation{What: fmt.Sprintf("%s: goroutines %.0f -> %.0f in %s", g.Proc, g.GoroutinesStart, g.GoroutinesEnd, g.Span.Round(time.Second))})
		}
		if g.RSSEnd > g.RSSStart*rssGrowth+rssSlack {
			r.Violations = append(r.Violations, Violation{What: fmt.Sprintf("%s: RSS %.0f -> %.0f MiB in %s", g.Proc, g.RSSStartMiB, g.RSSEndMiB, g.Span.Round(time.Second))})
		}
	}
	return r.done()
}

// 14. Every fault recovered.
func (x *indexed) recovered() Result {
	r := Result{Name: "every fault recovered", What: fmt.Sprintf("after each fault ended, every status pending then reached the stream within %s (without restarting anything)", recoveryLimit)}
	for _, e := range x.in.History {
		if e.Type != "recovery" {
			continue
		}
		r.Checked++
		if e.Err != "" {
			r.Violations = append(r.Violations, x.violation("", fmt.Sprintf("%s (step %d) ended at %s: %s", e.Kind, e.Step, x.at(e.Start), e.Err), e.Start.Add(-30*time.Second), e.End))
		}
	}
	return r.done()
}

// 15. The world came to rest.
func (x *indexed) cameToRest() Result {
	r := Result{Name: "the world came to rest", What: "after the schedule, with every fault healed, the replicas converge: every pod where its image puts it, no record owing a DELETED, the stream quiet, nothing pending", Checked: 1}
	if !x.in.Final.Quiesced {
		r.Violations = append(r.Violations, Violation{What: "still unsettled when the checks ran", Excerpt: x.in.Final.Unsettled})
	}
	return r.done()
}

func (r Result) done() Result {
	r.OK = len(r.Violations) == 0
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// 16. Other providers' objects are never touched.
func (x *indexed) foreignUntouched() Result {
	r := Result{Name: "other providers' objects untouched", What: "every Deployment and Service another DCM provider made with an id the run uses (its own service type) is there, not terminating, with the same generation, labels and no finalizer, whenever the run looked (every 10 s and after each one made) and at rest"}
	type made struct {
		o  Object
		at time.Time
		id string
	}
	var all []made
	for _, e := range x.in.History {
		if e.Type == "op" && e.Kind == OpForeign {
			for _, o := range e.Foreign {
				all = append(all, made{o, e.End, e.ID})
			}
		}
	}
	looks := []Entry{}
	for _, e := range x.in.History {
		if e.Type == "observe" && e.Kind == OpForeign && e.Err == "" {
			looks = append(looks, e)
		}
	}
	looks = append(looks, Entry{Start: x.in.Final.Time, Foreign: x.in.Final.Foreign, Note: "at rest"})
	for _, m := range all {
		r.Checked++
		for _, l := range looks {
			if !l.Start.After(m.at) {
				continue
			}
			var seen *Object
			for i := range l.Foreign {
				if l.Foreign[i].UID == m.o.UID {
					seen = &l.Foreign[i]
				}
			}
			what := ""
			switch {
			case seen == nil:
				what = "gone"
			case seen.Deleting:
				what = "terminating"
			case len(seen.Finalizers) > 0:
				what = fmt.Sprintf("holds finalizers %v", seen.Finalizers)
			case seen.Generation != m.o.Generation:
				what = fmt.Sprintf("generation %d, made with %d", seen.Generation, m.o.Generation)
			case !maps.Equal(seen.Labels, m.o.Labels):
				what = fmt.Sprintf("labels %v, made with %v", seen.Labels, m.o.Labels)
			}
			if what != "" {
				when := "at " + x.at(l.Start)
				if l.Note != "" {
					when = l.Note
				}
				r.Violations = append(r.Violations, x.violation(m.id, fmt.Sprintf("the %s provider's %s %s (id %s): %s %s", m.o.ServiceType, m.o.Kind, m.o.Name, m.id, what, when), m.at, l.Start))
				break
			}
		}
	}
	return r.done()
}

// 17. Every live container that asks for a Service has it.
func (x *indexed) serviceWhenAsked() Result {
	r := Result{Name: "a Service for every container that asks", What: "at rest, every live container whose Deployment opens a port (in the run every port is internal or external) has its Service, of the same incarnation and not terminating"}
	svcs := map[string]bool{}
	for _, s := range x.in.Final.Services {
		if !s.Deleting {
			svcs[s.ID+"/"+s.Incarnation] = true
		}
	}
	for _, d := range x.in.Final.Deployments {
		if d.Deleting || d.Ports == 0 {
			continue
		}
		r.Checked++
		if !svcs[d.ID+"/"+d.Incarnation] {
			r.Violations = append(r.Violations, x.violation(d.ID, fmt.Sprintf("Deployment %s (incarnation %s) opens %d ports but has no Service", d.Name, d.Incarnation, d.Ports), time.Time{}, x.in.Final.Time))
		}
	}
	return r.done()
}

// createdSince: a create of id that may have made a container was sent after (or
// within arrivalSlack before) from, and before to: what runs after a DELETE sent at
// from may be that create's.
func (x *indexed) createdSince(id string, from, to time.Time) bool {
	return slices.ContainsFunc(x.ops[id], func(c Entry) bool {
		return isCreate(c) && opEffect(c) != no && c.Start.After(from.Add(-arrivalSlack)) && c.Start.Before(to)
	})
}

// 18. A container whose DELETE answered 204 or 404 never runs afterwards.
func (x *indexed) deletedStaysGone() Result {
	r := Result{Name: "gone after DELETE answered", What: fmt.Sprintf("after a DELETE through a replica answered 204 or 404, the container does not run unless a create of the id was sent after that DELETE (or within %s before it): no GET answers 200, no RUNNING reaches the stream (%s after the answer, for one already on its way), no live Deployment at rest. A create still in flight when the DELETE was sent must be ordered before it: the DELETE deletes its record, and the garbage collector what it makes", arrivalSlack, eventSlack)}
	for _, id := range x.ids {
		for _, d := range x.ops[id] {
			if d.Kind != OpDelete || d.Via == "registry" || (d.Code != 204 && d.Code != 404) {
				continue
			}
			r.Checked++
			what, at := "", time.Time{}
			for _, g := range x.ops[id] {
				if g.Kind == OpGet && g.Via != "registry" && g.Code == 200 && g.Start.After(d.End) && !x.createdSince(id, d.Start, g.End) {
					what, at = fmt.Sprintf("GET #%d answered 200 %s", g.Seq, g.Status), g.End
					break
				}
			}
			if what == "" {
				for _, e := range x.events[id] {
					if e.Status == "RUNNING" && e.Time.After(d.End.Add(eventSlack)) && !x.createdSince(id, d.Start, e.Time) {
						what, at = fmt.Sprintf("RUNNING reached the stream (event seq %d)", e.Seq), e.Time
						break
					}
				}
			}
			if _, live := x.live[id]; what == "" && live && !x.createdSince(id, d.Start, x.in.Final.Time) {
				what, at = "it is live at rest", x.in.Final.Time
			}
			if what != "" {
				r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("DELETE #%d answered %d at %s, then %s with no create sent since", d.Seq, d.Code, x.at(d.End), what), d.Start.Add(-2*time.Second), at))
				break // one per id: the rest of its story is in the excerpt
			}
		}
	}
	return r.done()
}

// staleness is the bound the replicas were given (the default for older run folders).
func (x *indexed) staleness() time.Duration {
	if x.in.Run.MaxStaleness > 0 {
		return x.in.Run.MaxStaleness
	}
	return DefaultMaxStaleness
}

// 19. No 200 for a container deleted longer ago than the staleness bound.
func (x *indexed) noStaleOK() Result {
	bound := x.staleness() + stalenessSlack
	r := Result{Name: "no stale 200", What: fmt.Sprintf("no GET through a replica answers 200 (with a status other than DELETED) for a container deleted more than %s before it was sent (SP_K8S_MAX_STALENESS %s + %s), unless a create of the id answered after the deletion and was sent before the GET answered; deleted means a DELETE answered 204, a hand delete removed its Deployment, or a DELETED of it reached the stream", bound, x.staleness(), stalenessSlack)}
	for _, id := range x.ids {
		var gone []time.Time
		for _, e := range x.ops[id] {
			if isDelete(e) && opEffect(e) == yes {
				gone = append(gone, e.End)
			}
		}
		gone = append(gone, x.deleted[id]...)
		for _, g := range x.ops[id] {
			if g.Kind != OpGet || g.Via == "registry" || g.Code != 200 || g.Status == "DELETED" {
				continue
			}
			r.Checked++
			for _, t := range gone {
				if !g.Start.After(t.Add(bound)) {
					continue
				}
				recreated := slices.ContainsFunc(x.ops[id], func(c Entry) bool {
					return isCreate(c) && opEffect(c) != no && c.End.After(t) && c.Start.Before(g.End)
				})
				if !recreated {
					r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("GET #%d via %s (%s) answered 200 %s at %s, %s after the container was deleted (at %s)", g.Seq, g.Via, g.Proc, g.Status, x.at(g.End), g.Start.Sub(t).Round(time.Millisecond), x.at(t)), t.Add(-time.Second), g.End))
					break
				}
			}
		}
	}
	return r.done()
}

// 20. A DELETE that raced the only create of a fresh id and answered 204 leaves nothing.
func (x *indexed) deletedMeansDeleted() Result {
	r := Result{Name: "deleted means deleted", What: "a DELETE that answered 204 while the only create of its fresh id raced it through the other replica leaves nothing of the id at rest: no Deployment, Service, pod or record"}
	f := x.in.Final
	for _, id := range x.ids {
		if !strings.HasPrefix(id, deleteRacePrefix) {
			continue
		}
		for _, d := range x.ops[id] {
			if d.Kind != OpDelete || d.Code != 204 {
				continue
			}
			r.Checked++
			var left []string
			for kind, objs := range map[string][]Object{"Deployment": f.Deployments, "Service": f.Services, "pod": f.Pods, "record": f.Records} {
				for _, o := range objs {
					if o.ID == id {
						left = append(left, kind+" "+o.Name)
					}
				}
			}
			if len(left) > 0 {
				sort.Strings(left)
				r.Violations = append(r.Violations, x.violation(id, fmt.Sprintf("DELETE #%d answered 204, and at rest %s", d.Seq, strings.Join(left, ", ")), d.Start.Add(-2*time.Second), x.in.Final.Time))
			}
		}
	}
	return r.done()
}
