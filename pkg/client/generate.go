// Package client is a Go client of the container API (api/v1alpha1/openapi.yaml),
// generated into client.gen.go with the same oapi-codegen version as the server
// (make generate; CI checks it is up to date). It holds its own copy of the API's
// types, so a program needs no other package of this module:
//
//	c, err := client.NewClientWithResponses("http://127.0.0.1:8080")
//	resp, err := c.GetContainerWithResponse(ctx, "db")
//	if resp.JSON200 != nil && resp.JSON200.Service != nil { ... resp.JSON200.Service.Name ... }
//
// Example (and examples/threetier) shows a whole create, wait and delete.
package client

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../../api/v1alpha1/openapi.yaml
