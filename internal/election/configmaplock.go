package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ConfigMapLock is a resourcelock.Interface kept on a ConfigMap, since DCM's Helm chart
// grants providers no Leases. The record is JSON in the leader annotation; each update
// carries the resourceVersion last read, so of two concurrent writers only one succeeds.
// It has no labels, so it is never cached or mistaken for a container record.
type ConfigMapLock struct {
	Namespace, Name string
	Client          corev1client.ConfigMapsGetter
	LockConfig      resourcelock.ResourceLockConfig
	cm              *corev1.ConfigMap // as last read or written
}

var _ resourcelock.Interface = (*ConfigMapLock)(nil)

// Get returns the election record and its raw JSON, which client-go compares to spot a renewal.
func (l *ConfigMapLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	cm, err := l.Client.ConfigMaps(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.cm = cm
	var rec resourcelock.LeaderElectionRecord
	raw, found := cm.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	if found {
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			return nil, nil, fmt.Errorf("the leader election record of ConfigMap %s: %w", l.Describe(), err)
		}
	}
	return &rec, []byte(raw), nil
}

// Create makes the lock ConfigMap holding ler.
func (l *ConfigMapLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	raw, err := json.Marshal(ler)
	if err != nil {
		return err
	}
	cm, err := l.Client.ConfigMaps(l.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: l.Name, Namespace: l.Namespace,
		Annotations: map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: string(raw)},
	}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	l.cm = cm
	return nil
}

// Update writes ler over the ConfigMap as last read: a Conflict if another wrote it since.
func (l *ConfigMapLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if l.cm == nil {
		return errors.New("the lock ConfigMap was not read or created yet")
	}
	raw, err := json.Marshal(ler)
	if err != nil {
		return err
	}
	w := l.cm.DeepCopy()
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[resourcelock.LeaderElectionRecordAnnotationKey] = string(raw)
	cm, err := l.Client.ConfigMaps(l.Namespace).Update(ctx, w, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.cm = cm
	return nil
}

// RecordEvent emits a leadership Event if an EventRecorder is set (DCM's Role allows none).
func (l *ConfigMapLock) RecordEvent(s string) {
	if l.LockConfig.EventRecorder == nil || l.cm == nil {
		return
	}
	subject := &corev1.ConfigMap{ObjectMeta: l.cm.ObjectMeta}
	subject.Kind, subject.APIVersion = "ConfigMap", corev1.SchemeGroupVersion.String()
	l.LockConfig.EventRecorder.Eventf(subject, corev1.EventTypeNormal, "LeaderElection", "%s %s", l.LockConfig.Identity, s)
}

// Describe names the lock: namespace/name.
func (l *ConfigMapLock) Describe() string { return l.Namespace + "/" + l.Name }

// Identity is this replica's identity in the election.
func (l *ConfigMapLock) Identity() string { return l.LockConfig.Identity }
