// Package api holds the OpenAPI contract and the code generated from it.
// Do not edit api.gen.go: change openapi.yaml and run `go generate ./...`.
package api

import (
	_ "embed"
	"encoding/json"

	"github.com/getkin/kin-openapi/openapi3"
)

//go:generate go tool oapi-codegen -config cfg.yaml openapi.yaml

// SpecYAML is openapi.yaml as written, served at GET /openapi.yaml.
//
//go:embed openapi.yaml
var SpecYAML []byte

// SpecJSON is openapi.yaml as JSON, served at GET /openapi-full.json: the
// same document (every path, raw ones included), loaded and re-encoded by
// kin-openapi.
func SpecJSON() ([]byte, error) {
	doc, err := openapi3.NewLoader().LoadFromData(SpecYAML)
	if err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}
