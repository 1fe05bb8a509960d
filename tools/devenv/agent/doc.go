// Package agent is a test double of DCM's environment agent (dcm-project/environment-agent),
// the part a container provider meets. The real agent is not on the Go module proxy, so it
// cannot be built or run on these machines; the double follows the agent's published
// contract (openapi.yaml here, written from the agent's api/v1alpha1/openapi.yaml) and the
// behaviour seen when the real agent was run against this service:
//
//   - Registration: POST /api/v1alpha1/providers, validated against openapi.yaml. The name
//     is the natural key: 201 for a new one, 200 again, with the same id (?id= sets it).
//     metadata.resources.total_cpu must be a string ("200"): a JSON number is refused with
//     400 (DCM's older registry is the other way round). A service type that an embedded
//     provider (Options.Embedded; the agent's AGENT_EMBEDDED_SPS) or another provider
//     serves is 409; a schema_version other than v1alpha1 is 422. The answer is the
//     provider with "type": "external" and its health "status".
//   - Health: every PollInterval (the agent's 10 s) GET {endpoint}/health, PollTimeout
//     (5 s) each. 200 {"status": "healthy"} makes the provider Ready; {"status":
//     "unhealthy"} makes it Unhealthy; a failed poll (not 200, no JSON status, no answer)
//     makes it Unhealthy too, and Unavailable at the third in a row (Options.Failures). A
//     healthy poll brings it back to Ready. A provider is Unavailable from its
//     registration until a poll is answered. PollOnce steps the poll in tests.
//   - Forwarding (Forwarder, Create, Delete; Agent.Create and Agent.Delete gate it by the
//     provider's health: Ready sends, Unhealthy holds the request until Ready, Unavailable
//     refuses it at once with ErrUnavailable). A create is POST {endpoint} with the bare
//     spec, no ?id= (the provider names the container) and an Idempotency-Key, the same on
//     every try. A delete is DELETE {endpoint}/{id} with the id it is given: the real
//     agent gives DCM's own id, which the provider never learned (the create carried
//     none), so the provider answers 404. No request carries an Authorization header:
//     against a provider that requires a token (SP_API_TOKEN_FILE) every create and delete
//     is a 401, while health, exempt from the token, keeps the provider Ready. 5xx, 429
//     and transport errors are tried again, 3 tries in all, 2 s then 4 s apart (Backoff;
//     Forwarder.Sleep and Options.Sleep let tests skip the waits), whatever Retry-After
//     says; then the request ends RETRY_EXHAUSTED (ErrRetryExhausted). Any other answer
//     is final: a success, or NON_RETRYABLE_SP_ERROR (a delete's 404 and a 401 included).
//
// Where the double may still differ from the real agent:
//
//   - It takes requests only from its callers: no NATS, no CloudEvents, no DCM control
//     plane (the agent registers itself at the control plane's DCM_REGISTRATION_URL +
//     /agents; the double registers nowhere). "Withdraws the service type from DCM" is
//     only the Unavailable status here, and the outcomes (RETRY_EXHAUSTED,
//     NON_RETRYABLE_SP_ERROR) are returned, not published.
//   - The waits are exactly 2 s and 4 s; the real agent's are "up to" those (it may add
//     jitter and wait less). Whether it counts 3 tries in all or 3 retries after the first
//     try was read from its behaviour (give up after the 4 s wait), not from its code.
//   - Health: the agent's own code (internal/health/monitor, as stored at the time of
//     writing) counts a non-200 answer as a failed poll that leaves the state as it was
//     until the third; the double follows the behaviour seen (Unhealthy at once). The
//     state a provider has between its registration and its first poll is a guess
//     (Unavailable), and the double does not poll at once on registration.
//   - It is not known whether the real agent's delete carries an Idempotency-Key (the
//     double sends one), or whether it holds or refuses deletes as it does creates when
//     the provider is Unhealthy or Unavailable (the double gates both alike).
//   - A try whose reused connection is closed before any answer may be sent again by Go's
//     transport itself (a request with an Idempotency-Key is replayable), uncounted: so
//     would the real agent's, if it uses Go's net/http as the double does.
//   - Several Endpoints (round robin over replicas) stand for a Kubernetes Service in
//     front of the provider; the real agent knows one endpoint.
//   - Registration is validated only by openapi.yaml and the checks above: the real
//     agent may refuse more (its endpoint reachability, say), and it may have an
//     authentication of its own on /providers (its API declares 401 answers), which the
//     double has not.
package agent
