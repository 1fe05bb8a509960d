//go:build chaosbug

package status

import "context"

// plantedBug, only in `sp-chaos -inject drop-unsent-deleted` builds (-tags chaosbug):
// a DELETED that cannot be published (NATS down) is dropped and its record finalized,
// as if the deleted-report-owed finalizer were not honoured. The reporter then returns as
// if the publish had succeeded. The chaos run must report the lost DELETED.
func plantedBug(ctx context.Context, cl Cluster, p Plan) bool {
	if p.Finalize == nil {
		return false
	}
	_ = cl.Finalize(ctx, *p.Finalize)
	return true
}
