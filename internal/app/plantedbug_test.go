package app

import (
	"context"
	"errors"
	"testing"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
	"github.com/dcm-project/k8s-container-sp/internal/status"
)

// downPublisher fails every publish, as NATS down does.
type downPublisher struct{}

func (downPublisher) Publish(context.Context, string, string, status.Report) (bool, error) {
	return false, errors.New("NATS is down")
}

func report(s v1alpha1.ContainerStatus) status.Report {
	return status.Report{Status: container.Status{Status: s}}
}

// Without the tag the publisher is the real one: a failed DELETED stays failed (and the
// controller retries it before it finalizes). With -tags chaosbug (make test runs it) the
// failed DELETED is reported stored; a failed live status is still failed.
func TestPlantedBug(t *testing.T) {
	p := plantBug(downPublisher{})
	stored, err := p.Publish(t.Context(), "e1", "a", report(v1alpha1.DELETED))
	if planted {
		if !stored || err != nil {
			t.Errorf("planted: a failed DELETED gave (%v, %v), want stored", stored, err)
		}
	} else if stored || err == nil {
		t.Errorf("a failed DELETED gave (%v, %v), want the failure", stored, err)
	}
	if stored, err := p.Publish(t.Context(), "e2", "a", report(v1alpha1.RUNNING)); stored || err == nil {
		t.Errorf("a failed RUNNING gave (%v, %v), want the failure", stored, err)
	}
}
