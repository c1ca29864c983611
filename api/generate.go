// Package api holds the OpenAPI contract and the code generated from it.
// Do not edit api.gen.go: change openapi.yaml and run `go generate ./...`.
package api

//go:generate go tool oapi-codegen -config cfg.yaml openapi.yaml
