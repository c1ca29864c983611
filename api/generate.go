// Package api holds the OpenAPI contract and the code generated from it.
// Do not edit api.gen.go: change openapi.yaml and run `go generate ./...`.
package api

import _ "embed"

//go:generate go tool oapi-codegen -config cfg.yaml openapi.yaml

// SpecYAML is openapi.yaml as written, served at GET /openapi.yaml.
//
//go:embed openapi.yaml
var SpecYAML []byte
