// Package flow is what DCM's three-tier demo provider does with a container provider,
// written against the generated client (pkg/client): create a container under an id of
// the caller's choosing, wait until its Service has a name (the DNS name the other tiers
// dial), then delete it. The threetier command and the package client example run it.
package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dcm-project/k8s-container-sp/pkg/client"
)

// Options choose the container and how long to wait for its Service. The zero value
// creates the demo's database tier: id "db", PostgreSQL on 5432, internal.
type Options struct {
	// ID is the container's id (?id= on the create) and its metadata.name; default "db".
	ID string
	// Image is the image reference; default docker.io/library/postgres:17. Its registry
	// must be one the provider allows (SP_IMAGE_REGISTRIES).
	Image string
	// Port is the container port, exposed inside the cluster; default 5432.
	Port int32
	// Env is the container's environment (the demo sets the database's password).
	Env []client.EnvVar
	// Poll is the pause between two GETs; default 500ms.
	Poll time.Duration
	// Timeout bounds the wait for the Service name; default 2 minutes.
	Timeout time.Duration
	// CreateRetry bounds how long after the first create it is sent again, when answered
	// 409 being-deleted (the id's previous container is still being deleted; the id is
	// free once its deletion is delivered): each wait is the answer's Retry-After, and a
	// wait that would end past the bound is not taken. Default 30 s; negative: no retry.
	CreateRetry time.Duration
	// Logf, when set, is told each step.
	Logf func(format string, args ...any)
	// BeforeDelete, when set, is called with the container as the GET that carried its
	// Service name answered, before the DELETE; its error is returned (the DELETE is
	// still sent).
	BeforeDelete func(ctx context.Context, c *client.Container) error
}

// Result is what the flow saw.
type Result struct {
	// ServiceName is the GET's service.name: the Service's name, which is the DNS name
	// (ServiceName.<namespace>.svc) the other tiers use.
	ServiceName string
	// Container is the GET that carried it.
	Container *client.Container
}

// ErrCreateFailed is returned when a GET of the container answers 404 after a create
// the provider accepted: the create failed (the demo reports the stack as failed).
var ErrCreateFailed = errors.New("the container is gone: the create failed")

// Run creates the container, polls GET until service.name is set, and deletes it (a
// 404 on the DELETE counts as deleted). It returns the Service name it saw.
func Run(ctx context.Context, c *client.ClientWithResponses, o Options) (Result, error) {
	o.defaults()
	if err := Create(ctx, c, o); err != nil {
		return Result{}, err
	}
	res, err := WaitForService(ctx, c, o)
	if err == nil && o.BeforeDelete != nil {
		err = o.BeforeDelete(ctx, res.Container)
	}
	// Delete even when the wait failed, so the flow leaves nothing behind.
	if derr := Delete(ctx, c, o.ID); derr != nil {
		return res, errors.Join(err, derr)
	}
	o.Logf("deleted %s", o.ID)
	return res, err
}

func (o *Options) defaults() {
	if o.ID == "" {
		o.ID = "db"
	}
	if o.Image == "" {
		o.Image = "docker.io/library/postgres:17"
	}
	if o.Port == 0 {
		o.Port = 5432
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.CreateRetry == 0 {
		o.CreateRetry = 30 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Create sends POST /api/v1alpha1/containers?id=<ID> with one internal port. A 409
// being-deleted is sent again after its Retry-After, within o.CreateRetry in all;
// anything else but 201 Created is an error carrying the problem's detail.
func Create(ctx context.Context, c *client.ClientWithResponses, o Options) error {
	o.defaults()
	var cpuMin, cpuMax client.CpuQuantity
	if err := cpuMin.FromCpuQuantity0(1); err != nil {
		return err
	}
	if err := cpuMax.FromCpuQuantity0(2); err != nil {
		return err
	}
	ports := []client.ContainerPort{{ContainerPort: o.Port, Visibility: client.ContainerPortVisibilityInternal}}
	body := client.Container{Spec: client.ContainerSpec{
		ServiceType: client.ContainerSpecServiceTypeContainer,
		Metadata:    client.ContainerMetadata{Name: o.ID},
		Image:       client.ContainerImage{Reference: o.Image},
		Resources: client.ContainerResources{
			Cpu:    client.CpuRange{Min: cpuMin, Max: cpuMax},
			Memory: client.MemoryRange{Min: "256MB", Max: "512MB"},
		},
		Network: &client.ContainerNetwork{Ports: &ports},
	}}
	if len(o.Env) > 0 {
		body.Spec.Process = &client.ContainerProcess{Env: &o.Env}
	}
	id := o.ID
	var resp *client.CreateContainerResponse
	for start := time.Now(); ; {
		var err error
		resp, err = c.CreateContainerWithResponse(ctx, &client.CreateContainerParams{Id: &id}, body)
		if err != nil {
			return fmt.Errorf("create %s: %w", o.ID, err)
		}
		if resp.StatusCode() == http.StatusCreated {
			break
		}
		detail := problem(resp.HTTPResponse, resp.Body)
		if !beingDeleted(resp.HTTPResponse, resp.Body) {
			return fmt.Errorf("create %s: %s", o.ID, detail)
		}
		wait := retryAfter(resp.HTTPResponse)
		if time.Since(start)+wait > o.CreateRetry {
			return fmt.Errorf("create %s: %s (gave up: the next try would be %s after the first, past %s)",
				o.ID, detail, (time.Since(start) + wait).Round(time.Second), o.CreateRetry)
		}
		o.Logf("create %s: %s; again in %s", o.ID, detail, wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("create %s: %w", o.ID, ctx.Err())
		case <-time.After(wait):
		}
	}
	status := ""
	if resp.JSON201 != nil && resp.JSON201.Status != nil {
		status = string(*resp.JSON201.Status)
	}
	o.Logf("created %s (%s)", o.ID, status)
	return nil
}

// beingDeleted says whether an answer is 409 being-deleted: the id's previous container
// is still being deleted, nothing was created, and the same create succeeds later.
// Another 409 (already-exists) is not retried.
func beingDeleted(r *http.Response, body []byte) bool {
	var p client.Problem
	return r.StatusCode == http.StatusConflict && json.Unmarshal(body, &p) == nil &&
		strings.HasSuffix(p.Type, "/being-deleted")
}

// retryAfter is an answer's Retry-After (seconds, or an HTTP date), at least 100 ms so
// that a "0" does not make a busy loop; 1 s when it has none the flow can read.
func retryAfter(r *http.Response) time.Duration {
	const least = 100 * time.Millisecond
	v := r.Header.Get("Retry-After")
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return max(time.Duration(n)*time.Second, least)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), least)
	}
	return time.Second
}

// WaitForService polls GET /api/v1alpha1/containers/<ID> until the answer carries
// service.name. A 404 is ErrCreateFailed; other errors (a 503 while the provider cannot
// reach Kubernetes, a refused connection) are retried until the timeout.
func WaitForService(ctx context.Context, c *client.ClientWithResponses, o Options) (Result, error) {
	o.defaults()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var last error
	for {
		resp, err := c.GetContainerWithResponse(ctx, o.ID)
		switch {
		case err != nil:
			last = err
		case resp.StatusCode() == http.StatusNotFound:
			return Result{}, fmt.Errorf("get %s: %w", o.ID, ErrCreateFailed)
		case resp.StatusCode() != http.StatusOK || resp.JSON200 == nil:
			last = errors.New(problem(resp.HTTPResponse, resp.Body))
		case resp.JSON200.Service != nil && resp.JSON200.Service.Name != "":
			ctr := resp.JSON200
			o.Logf("%s: service %s", o.ID, ctr.Service.Name)
			return Result{ServiceName: ctr.Service.Name, Container: ctr}, nil
		default:
			last = errors.New("no service.name yet")
		}
		select {
		case <-ctx.Done():
			return Result{}, fmt.Errorf("get %s: no service.name after %s: %w", o.ID, o.Timeout, last)
		case <-time.After(o.Poll):
		}
	}
}

// Delete sends DELETE /api/v1alpha1/containers/<id>; 204 and 404 (already gone) are
// success.
func Delete(ctx context.Context, c *client.ClientWithResponses, id string) error {
	resp, err := c.DeleteContainerWithResponse(ctx, id)
	if err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	switch resp.StatusCode() {
	case http.StatusNoContent, http.StatusNotFound:
		return nil
	}
	return fmt.Errorf("delete %s: %s", id, problem(resp.HTTPResponse, resp.Body))
}

// problem describes an error answer: its status and the problem's detail (or title).
func problem(r *http.Response, body []byte) string {
	var p client.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		return r.Status
	}
	if p.Detail != nil && *p.Detail != "" {
		return r.Status + ": " + *p.Detail
	}
	return r.Status + ": " + p.Title
}
