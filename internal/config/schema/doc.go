// Package schema generates the JSON Schema of drover's config files
// (`*.pvn.yaml`) from the Go types of package config, so editors can complete
// and check configs as they are written.
//
// The schema mirrors the decoder (config.Decode): it accepts the snake_case
// spelling of every key and the deprecated alias keys, leaves out the fields
// drover sets itself, marks drover extensions, and rejects the Prodvana fields
// drover does not support yet. Descriptions come from the doc comments of the
// config package, which only exist in its source, so the schema is generated
// at `go generate` time (`make generate`) and checked in as
// docs/schema/drover.schema.json; a test fails when the file is out of date.
package schema

//go:generate go run ./gen
