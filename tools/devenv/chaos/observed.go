package chaos

import "time"

// What the checker gets: plain data, written to the run folder, so the checks are pure
// functions that can be re-run on a finished run (sp-chaos -recheck DIR) and tested with
// hand-made tables.

// Event is one message of the JetStream stream, as stored.
type Event struct {
	Seq     uint64    `json:"seq"`
	Subject string    `json:"subject"`
	Time    time.Time `json:"time"` // when the stream stored it
	CEID    string    `json:"ce_id"`
	CEType  string    `json:"ce_type"`
	ID      string    `json:"id"`
	Status  string    `json:"status"`
	Message string    `json:"message,omitempty"`
}

// Object is what the checks need of a Kubernetes object of a container.
type Object struct {
	Name        string   `json:"name"`
	ID          string   `json:"id"`
	Incarnation string   `json:"incarnation,omitempty"`
	Deleting    bool     `json:"deleting,omitempty"`
	Finalizers  []string `json:"finalizers,omitempty"`
	// Deployments: the pod template's image and the rollout revision, and how many
	// container ports it opens (in a chaos run every port is internal or external, so
	// a Deployment with ports asked for a Service).
	Image    string `json:"image,omitempty"`
	Revision string `json:"revision,omitempty"`
	Ports    int    `json:"ports,omitempty"`
	// Another provider's objects: what kind, their service type, and what tells them
	// unchanged (the same object, the same spec generation, the same labels).
	Kind        string            `json:"kind,omitempty"`
	ServiceType string            `json:"service_type,omitempty"`
	UID         string            `json:"uid,omitempty"`
	Generation  int64             `json:"generation,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	// Pods.
	Phase   string `json:"phase,omitempty"`
	Ready   bool   `json:"ready,omitempty"`
	Waiting string `json:"waiting,omitempty"`
	Node    string `json:"node,omitempty"`
}

// APIView is a container as a replica's LIST shows it.
type APIView struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// Final is the world at rest, after the run quiesced.
type Final struct {
	Time        time.Time `json:"time"`
	Deployments []Object  `json:"deployments"`
	Services    []Object  `json:"services"`
	Pods        []Object  `json:"pods"`
	// Foreign are other providers' Deployments and Services (managed-by dcm, another
	// service type); they are no container's and appear in no other list.
	Foreign []Object `json:"foreign,omitempty"`
	// Records are the ConfigMaps named dcm-container-<id> (or labelled as records).
	Records []Object `json:"records"`
	// Registry is every instance the registry lists: id -> status.
	Registry map[string]string `json:"registry"`
	// RegistryErr: the registry could not be listed.
	RegistryErr string `json:"registry_err,omitempty"`
	// RegistryConsumer: how far the registry's consumer of the stream had come (nil:
	// it could not be read).
	RegistryConsumer *ConsumerState `json:"registry_consumer,omitempty"`
	// Views: per replica process, its LIST (id -> status and message).
	Views map[string]map[string]APIView `json:"views"`
	// Leaders: how many replicas said sp_leader 1.
	Leaders int `json:"leaders"`
	// Panics: per log file, the lines that show a panic.
	Panics map[string][]string `json:"panics,omitempty"`
	// Quiesced is false when the run did not come to rest in time (Unsettled says what
	// was still moving); the checks run anyway.
	Quiesced  bool     `json:"quiesced"`
	Unsettled []string `json:"unsettled,omitempty"`
}

// RunInfo describes the run for the report.
type RunInfo struct {
	Seed     uint64        `json:"seed"`
	Duration time.Duration `json:"duration"`
	Started  time.Time     `json:"started"`
	Ended    time.Time     `json:"ended"`
	Dir      string        `json:"dir"`
	// Timings of the phases (setup, schedule, quiesce, check).
	Phases map[string]time.Duration `json:"phases"`
	Steps  int                      `json:"steps"`
	// MaxStaleness is the replicas' SP_K8S_MAX_STALENESS, the bound the staleness check
	// holds them to.
	MaxStaleness time.Duration `json:"max_staleness,omitempty"`
	// Inject: the bug built into the service on purpose, if any.
	Inject string `json:"inject,omitempty"`
}
