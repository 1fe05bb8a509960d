// Package election runs one replica's status controller at a time: client-go's leader
// election over a ConfigMap lock, since DCM's Role grants no Leases.
package election
