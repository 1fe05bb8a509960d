// Package chaos is the seeded fault-injection run behind `make chaos` (issue 16).
//
//   - world.go, replica.go, endpoint.go, recorder.go: the world of real parts (two
//     service replicas as processes, the registry behind a stand-in for the provider's
//     Service, NATS with the stream and the checker's own consumer);
//   - schedule.go: the seeded plan of operations and faults;
//   - run.go, ops.go, faults.go, node.go, inject.go: playing it, recording every action
//     and answer in the history (history.go);
//   - recovery.go: how long each fault's pending statuses took to reach the stream;
//   - quiesce.go, snapshot.go: bringing the world to rest and capturing it as data
//     (observed.go);
//   - check.go (pure), measures.go, excerpt.go: the invariants and what they show;
//   - report.go: reliability.md and reliability.json (docs/ with sp-chaos -out docs).
package chaos
