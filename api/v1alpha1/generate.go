// Package v1alpha1 is the container API contract: openapi.yaml is the source of truth and
// api.gen.go is generated from it (make generate; CI checks it is up to date).
package v1alpha1

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml openapi.yaml
