package model

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// Server answers the part of the Kubernetes REST API the service uses for one
// namespace holding N running containers: list and watch of Deployments, Pods, Services
// and record ConfigMaps (streamed: generated one object at a time as they are written,
// never held, so the model's memory is the service's), get of one object, the watch-list
// (sendInitialEvents=true, what client-go's reflectors ask first), the permission checks,
// the namespace, the election's lock ConfigMap
// (the one object kept, in memory) and /readyz. Anything else answers 404 and is counted
// in Unknown, so a request the model does not know is seen, not silently mis-answered.
// Watches of the four kinds are streamed in protobuf to a client that asks for it, as
// the apiserver does (client-go's generated clients, the service's informers, do by
// default); everything else is JSON.
type Server struct {
	N         int
	Namespace string
	// Log receives one line per request the server does not know (nil: none).
	Log io.Writer

	enc *encoder
	rv  atomic.Int64 // the namespace's resourceVersion: past every object's

	mu       sync.Mutex
	watchers map[*watcher]struct{}
	locks    map[string]*corev1.ConfigMap // ConfigMaps written through the API (the election's)
	unknown  map[string]int
	counts   map[string]int // requests by "VERB kind"
}

// firstResourceVersion is the first container's first resourceVersion: ten digits, like
// every other container's (the protobuf templates need each container's as long as the
// reference's).
const firstResourceVersion = 1_000_000_000

// NewServer serves n containers in namespace, created at created.
func NewServer(namespace string, n int, created time.Time) (*Server, error) {
	const base = firstResourceVersion
	enc, err := newEncoder(namespace, metav1.NewTime(created.Truncate(time.Second)), base)
	if err != nil {
		return nil, err
	}
	s := &Server{N: n, Namespace: namespace, enc: enc, watchers: map[*watcher]struct{}{},
		locks: map[string]*corev1.ConfigMap{}, unknown: map[string]int{}, counts: map[string]int{}}
	s.rv.Store(base + 4*int64(n) + 100)
	return s, nil
}

// Unknown is the requests answered 404 because the server does not know them, by
// "METHOD path", with their counts.
func (s *Server) Unknown() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.unknown))
	for k, v := range s.unknown {
		out[k] = v
	}
	return out
}

// Requests is how many requests the server answered, by "VERB resource" (LIST, WATCH,
// WATCHLIST, GET, CREATE, UPDATE).
func (s *Server) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

func (s *Server) count(verb, what string) {
	s.mu.Lock()
	s.counts[verb+" "+what]++
	s.mu.Unlock()
}

// kindOf is the container kind a collection path names.
var kindOf = map[string]Kind{
	"deployments": Deployments, "pods": Pods, "services": Services, "configmaps": Records,
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.Trim(r.URL.Path, "/")
	parts := strings.Split(p, "/")
	switch {
	case p == "readyz" || p == "livez" || p == "healthz":
		_, _ = io.WriteString(w, "ok")
		return
	case p == "version":
		writeJSON(w, http.StatusOK, map[string]string{"major": "1", "minor": "35", "gitVersion": "v1.35.0-model"})
		return
	case r.Method == http.MethodPost && p == "apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
		s.count("CREATE", "selfsubjectaccessreviews")
		var rev authorizationv1.SelfSubjectAccessReview
		if err := decodeBody(r, &rev); err != nil {
			s.status(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
		rev.APIVersion, rev.Kind = "authorization.k8s.io/v1", "SelfSubjectAccessReview"
		rev.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "the model allows everything"}
		writeJSON(w, http.StatusCreated, &rev)
		return
	}
	// Namespaced: api/v1/namespaces/NS[/RES[/NAME]] or apis/GROUP/VERSION/namespaces/NS/...
	var rest []string
	switch {
	case len(parts) >= 4 && parts[0] == "api" && parts[1] == "v1" && parts[2] == "namespaces":
		rest = parts[3:]
	case len(parts) >= 5 && parts[0] == "apis" && parts[3] == "namespaces":
		rest = parts[4:]
	}
	if len(rest) == 0 || rest[0] != s.Namespace {
		s.unknownRequest(w, r)
		return
	}
	group := parts[0]
	if group == "apis" {
		group = parts[1] + "/" + parts[2]
	}
	switch {
	case len(rest) == 1 && group == "api" && r.Method == http.MethodGet:
		s.count("GET", "namespaces")
		ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: s.Namespace, UID: "model-namespace", ResourceVersion: "1",
				Labels: map[string]string{"kubernetes.io/metadata.name": s.Namespace}},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
		writeJSON(w, http.StatusOK, ns)
	case len(rest) >= 2:
		k, ok := kindOf[rest[1]]
		if !ok || (k == Deployments) != (group == "apps/v1") || (k != Deployments && group != "api") {
			s.unknownRequest(w, r)
			return
		}
		s.resource(w, r, k, rest[2:])
	default:
		s.unknownRequest(w, r)
	}
}

func isWatch(r *http.Request) bool {
	v := r.URL.Query().Get("watch")
	return v == "true" || v == "1"
}

// resource answers a request on a collection of kind k (name: empty, or the object's).
func (s *Server) resource(w http.ResponseWriter, r *http.Request, k Kind, name []string) {
	q := r.URL.Query()
	sel, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		s.status(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	if f := q.Get("fieldSelector"); f != "" && len(name) == 0 {
		s.unknownRequest(w, r) // the service uses none: say so if that changes
		return
	}
	switch {
	case len(name) == 0 && r.Method == http.MethodGet && isWatch(r):
		initial := q.Get("sendInitialEvents") == "true"
		rv := q.Get("resourceVersion")
		if initial {
			s.count("WATCHLIST", k.String())
		} else {
			s.count("WATCH", k.String())
		}
		// sendInitialEvents: every object as ADDED, then the bookmark that ends them.
		// A watch from "" or "0" starts with every object too (the apiserver's
		// "any version" semantics); from a given resourceVersion, with what follows.
		s.watch(w, r, k, sel, !initial && rv != "" && rv != "0", wantsProtobuf(r))
	case len(name) == 0 && r.Method == http.MethodGet:
		s.count("LIST", k.String())
		s.list(w, k, sel)
	case len(name) == 1 && r.Method == http.MethodGet:
		s.count("GET", k.String())
		s.get(w, k, name[0])
	case k == Records && len(name) == 0 && r.Method == http.MethodPost:
		s.count("CREATE", k.String())
		s.writeLock(w, r, "")
	case k == Records && len(name) == 1 && r.Method == http.MethodPut:
		s.count("UPDATE", k.String())
		s.writeLock(w, r, name[0])
	default:
		s.unknownRequest(w, r)
	}
}

// matching calls fn for each container whose object of kind k sel selects, in order,
// until fn returns false. A selector naming one instance id visits only that container.
func (s *Server) matching(k Kind, sel labels.Selector, fn func(i int) bool) {
	if id, ok := sel.RequiresExactMatch(container.LabelInstanceID); ok {
		if i, ok := IndexOf(id); ok && i < s.N && sel.Matches(labels.Set(s.labels(i, k))) {
			fn(i)
		}
		return
	}
	// The labels of a kind differ between containers only in these: a selector on
	// none of them selects all or nothing, told by the first.
	same := true
	if reqs, ok := sel.Requirements(); ok {
		for _, r := range reqs {
			switch r.Key() {
			case container.LabelInstanceID, container.LabelIncarnation, "pod-template-hash":
				same = false
			}
		}
	}
	if same && !sel.Matches(labels.Set(s.labels(0, k))) {
		return
	}
	for i := range s.N {
		if !same && !sel.Matches(labels.Set(s.labels(i, k))) {
			continue
		}
		if !fn(i) {
			return
		}
	}
}

// labels are container i's labels on its object of kind k.
func (s *Server) labels(i int, k Kind) map[string]string {
	l := container.SystemLabels(ID(i))
	switch k {
	case Records:
		l[container.LabelRecord] = container.RecordValue
	case Pods:
		l["pod-template-hash"] = templateHash(i)
		l[container.LabelIncarnation] = uid(i, 4)
		fallthrough
	default:
		l["team"], l["env"] = "payments", "prod"
	}
	return l
}

// list writes the list of kind k, item by item.
func (s *Server) list(w http.ResponseWriter, k Kind, sel labels.Selector) {
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 64<<10)
	_, _ = fmt.Fprintf(bw, `{"kind":"%sList","apiVersion":"%s","metadata":{"resourceVersion":"%d"},"items":[`, k.kind(), k.apiVersion(), s.rv.Load())
	var buf []byte
	first := true
	s.matching(k, sel, func(i int) bool {
		if !first {
			_ = bw.WriteByte(',')
		}
		first = false
		buf = s.enc.append(buf[:0], i, k)
		_, err := bw.Write(buf)
		return err == nil
	})
	if k == Records && sel.Empty() {
		s.mu.Lock()
		for _, cm := range s.locks {
			raw, _ := json.Marshal(cm)
			if !first {
				_ = bw.WriteByte(',')
			}
			first = false
			_, _ = bw.Write(raw)
		}
		s.mu.Unlock()
	}
	_, _ = bw.WriteString("]}")
	_ = bw.Flush()
}

// get writes one object, by name.
func (s *Server) get(w http.ResponseWriter, k Kind, name string) {
	if k == Records {
		s.mu.Lock()
		cm, ok := s.locks[name]
		var raw []byte
		if ok {
			raw, _ = json.Marshal(cm)
		}
		s.mu.Unlock()
		if ok {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(raw)
			return
		}
	}
	i, ok := indexOfName(k, name)
	if !ok || i >= s.N || name != s.nameOf(i, k) {
		s.status(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s %q not found", k, name))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.enc.append(nil, i, k))
}

func (s *Server) nameOf(i int, k Kind) string {
	switch k {
	case Deployments:
		return DeploymentName(i)
	case Pods:
		return PodName(i)
	case Services:
		return ServiceName(i)
	}
	return container.RecordName(ID(i))
}

// writeLock creates (name "") or updates a ConfigMap that is not a container record:
// the election's lock. An update must name the resourceVersion it read (else Conflict),
// as the apiserver's optimistic concurrency wants.
func (s *Server) writeLock(w http.ResponseWriter, r *http.Request, name string) {
	var cm corev1.ConfigMap
	if err := decodeBody(r, &cm); err != nil {
		s.status(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	if container.InstanceID(cm.Labels) != "" {
		s.unknownRequest(w, r) // a record written: nothing the model expects at steady state
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, exists := s.locks[cm.Name]
	switch {
	case name == "" && exists:
		s.status(w, http.StatusConflict, "AlreadyExists", fmt.Sprintf("configmaps %q already exists", cm.Name))
		return
	case name != "" && (!exists || name != cm.Name):
		s.status(w, http.StatusNotFound, "NotFound", fmt.Sprintf("configmaps %q not found", name))
		return
	case name != "" && cm.ResourceVersion != cur.ResourceVersion:
		s.status(w, http.StatusConflict, "Conflict", "the object has been modified; please apply your changes to the latest version and try again")
		return
	}
	cm.APIVersion, cm.Kind, cm.Namespace = "v1", "ConfigMap", s.Namespace
	if !exists {
		cm.UID = "model-lock"
		cm.CreationTimestamp = metav1.Now()
	}
	cm.ResourceVersion = strconv.FormatInt(s.rv.Add(1), 10)
	s.locks[cm.Name] = &cm
	code := http.StatusOK
	if name == "" {
		code = http.StatusCreated
	}
	writeJSON(w, code, &cm)
}

// watcher is one open watch.
type watcher struct {
	kind   Kind
	sel    labels.Selector
	proto  bool        // events in protobuf frames (pbEvent), not JSON lines
	events chan []byte // encoded events
}

// wantsProtobuf: the request asks for protobuf, as client-go's generated clients do by
// default (the service's informers); the apiserver then streams a watch in protobuf.
// Other answers stay JSON, which those clients accept too: they are few and small.
func wantsProtobuf(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.HasPrefix(a, "application/vnd.kubernetes.protobuf") && !strings.Contains(a, ";as=")
}

// watch streams kind k's events until the client goes, the watch's timeoutSeconds pass
// or the server closes it. Unless onlyNew, every selected object comes first as ADDED,
// then (when asked for, as the watch-list does) the bookmark that ends the initial
// events. Bookmarks follow every 30 s when allowed, as the apiserver's about every
// minute keep the service's caches from looking silent (store.SilenceBound).
func (s *Server) watch(w http.ResponseWriter, r *http.Request, k Kind, sel labels.Selector, onlyNew, proto bool) {
	q := r.URL.Query()
	flusher, _ := w.(http.Flusher)
	if sel == nil {
		sel = labels.Nothing()
	}
	wt := &watcher{kind: k, sel: sel, proto: proto, events: make(chan []byte, 4096)}
	s.mu.Lock()
	s.watchers[wt] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, wt)
		s.mu.Unlock()
	}()
	if proto {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	if !onlyNew {
		var buf []byte
		s.matching(k, sel, func(i int) bool {
			if proto {
				buf = s.enc.appendAdded(buf[:0], i, k)
			} else {
				buf = append(buf[:0], `{"type":"ADDED","object":`...)
				buf = s.enc.append(buf, i, k)
				buf = append(buf, "}\n"...)
			}
			_, err := bw.Write(buf)
			return err == nil
		})
		if q.Get("sendInitialEvents") == "true" {
			_, _ = bw.Write(s.bookmark(k, true, proto))
		}
	}
	_ = bw.Flush()
	if flusher != nil {
		flusher.Flush()
	}
	timeout := 30 * time.Minute
	if t, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && t > 0 {
		timeout = time.Duration(t) * time.Second
	}
	end := time.NewTimer(timeout)
	defer end.Stop()
	marks := time.NewTicker(30 * time.Second)
	defer marks.Stop()
	bookmarks := q.Get("allowWatchBookmarks") == "true"
	for {
		var ev []byte
		select {
		case <-r.Context().Done():
			return
		case <-end.C:
			return
		case <-marks.C:
			if !bookmarks {
				continue
			}
			ev = s.bookmark(k, false, proto)
		case ev = <-wt.events:
		}
		if _, err := w.Write(ev); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// bookmark is a BOOKMARK event at the current resourceVersion; initialEnd marks the end
// of a watch-list's initial events.
func (s *Server) bookmark(k Kind, initialEnd, proto bool) []byte {
	if proto {
		m := metav1.ObjectMeta{ResourceVersion: strconv.FormatInt(s.rv.Load(), 10)}
		if initialEnd {
			m.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
		}
		ev, err := pbEvent(watch.Bookmark, emptyObject(k, m))
		if err != nil {
			panic(err) // an empty object of a built-in kind always encodes
		}
		return ev
	}
	ann := ""
	if initialEnd {
		ann = `,"annotations":{"` + metav1.InitialEventsAnnotationKey + `":"true"}`
	}
	return fmt.Appendf(nil, `{"type":"BOOKMARK","object":{"kind":"%s","apiVersion":"%s","metadata":{"resourceVersion":"%d"%s}}}`+"\n",
		k.kind(), k.apiVersion(), s.rv.Load(), ann)
}

// Change sends an event about container i's object of kind k to the watches that
// select it: typ MODIFIED or DELETED of the object change returns (given container i's
// objects as Build makes them; it sets the new resourceVersion itself), or ADDED. It
// returns how many watches it went to.
func (s *Server) Change(typ watch.EventType, i int, k Kind, change func(Container) metav1.Object) (int, error) {
	c, err := Build(s.Namespace, i, s.enc.created, s.enc.base)
	if err != nil {
		return 0, err
	}
	obj := change(c)
	obj.SetResourceVersion(strconv.FormatInt(s.rv.Add(1), 10))
	raw, err := json.Marshal(obj)
	if err != nil {
		return 0, err
	}
	ev := fmt.Appendf(nil, `{"type":%q,"object":%s}`+"\n", typ, raw)
	pb, err := pbEvent(typ, obj.(runtime.Object))
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	var to []*watcher
	for wt := range s.watchers {
		if wt.kind == k && wt.sel.Matches(labels.Set(obj.GetLabels())) {
			to = append(to, wt)
		}
	}
	s.mu.Unlock()
	for _, wt := range to {
		ev := ev
		if wt.proto {
			ev = pb
		}
		select {
		case wt.events <- ev:
		case <-time.After(10 * time.Second):
			return 0, fmt.Errorf("a %s watch took no event for 10 s", k)
		}
	}
	return len(to), nil
}

// Watches is how many watches of kind k are open.
func (s *Server) Watches(k Kind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for wt := range s.watchers {
		if wt.kind == k {
			n++
		}
	}
	return n
}

func (s *Server) unknownRequest(w http.ResponseWriter, r *http.Request) {
	what := r.Method + " " + r.URL.Path
	if q := r.URL.RawQuery; q != "" {
		what += "?" + q
	}
	s.mu.Lock()
	s.unknown[r.Method+" "+r.URL.Path]++
	first := s.unknown[r.Method+" "+r.URL.Path] == 1
	s.mu.Unlock()
	if first && s.Log != nil {
		fmt.Fprintf(s.Log, "model apiserver: a request the model does not serve (404): %s\n", what)
	}
	s.status(w, http.StatusNotFound, "NotFound", "the model apiserver does not serve "+what)
}

func (s *Server) status(w http.ResponseWriter, code int, reason, msg string) {
	writeJSON(w, code, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: msg, Reason: metav1.StatusReason(reason), Code: int32(code)})
}

// decodeBody reads a request's object: JSON, or protobuf, which client-go's generated
// clients send by default (answers are JSON, which they accept too).
func decodeBody(r *http.Request, into runtime.Object) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	_, _, err = scheme.Codecs.UniversalDeserializer().Decode(b, nil, into)
	return err
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(raw)
}

// emptyObject is an object of kind k with only metadata m: a bookmark's.
func emptyObject(k Kind, m metav1.ObjectMeta) runtime.Object {
	tm := metav1.TypeMeta{APIVersion: k.apiVersion(), Kind: k.kind()}
	switch k {
	case Deployments:
		return &appsv1.Deployment{TypeMeta: tm, ObjectMeta: m}
	case Pods:
		return &corev1.Pod{TypeMeta: tm, ObjectMeta: m}
	case Services:
		return &corev1.Service{TypeMeta: tm, ObjectMeta: m}
	}
	return &corev1.ConfigMap{TypeMeta: tm, ObjectMeta: m}
}
