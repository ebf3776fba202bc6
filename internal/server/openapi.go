package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
)

// The OpenAPI 3 document of the API, made from the route table: each
// route's path, permission, request body, answer and query parameters.
// api/openapi.json is its checked-in copy (make generate); a test keeps
// the two, and the Go client, in step.

// OpenAPI returns the API's OpenAPI 3.0 document (indented JSON), made
// once.
func (s *Server) OpenAPI() ([]byte, error) {
	s.openapiOnce.Do(func() { s.openapi, s.openapiErr = openAPIDocument(s.table) })
	return s.openapi, s.openapiErr
}

// OpenAPIDocument is the document of every server (for go generate).
func OpenAPIDocument() ([]byte, error) { return openAPIDocument((&Server{}).routeTable()) }

// openAPIDocument builds the document of routes.
func openAPIDocument(routes []route) ([]byte, error) {
	g := &schemaGen{defs: map[string]any{}}
	paths := map[string]map[string]any{}
	for _, rt := range routes {
		op := map[string]any{
			"operationId": operationID(rt),
			"summary":     rt.summary,
		}
		switch rt.scope {
		case scopeOpen:
			op["security"] = []any{}
		default:
			desc := "Needs a credential"
			if rt.perm != "" {
				desc = fmt.Sprintf("Needs permission %q on %s (roles: %s)", rt.perm, scopeDoc(rt.scope), strings.Join(rolesWith(rt.perm), ", "))
			}
			op["description"] = desc + "."
			op["x-drover-permission"] = string(rt.perm)
			op["x-drover-scope"] = rt.scope.String()
		}
		var params []any
		for _, name := range pathParams(rt.path) {
			params = append(params, map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range rt.query {
			params = append(params, map[string]any{"name": q.name, "in": "query", "description": q.doc, "schema": map[string]any{"type": q.typ}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if rt.req != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.req))}}}
		}
		ok := map[string]any{"description": "OK"}
		switch {
		case rt.resp != nil:
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.resp))}}
		case rt.path == "/v1/watch":
			ok["description"] = "Server-sent events: each event's data is an Event (JSON), its id the event's seq"
			ok["content"] = map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{"type": "string"}}}
		case isProbe(rt.path):
			ok["content"] = map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string", "enum": []any{"ok\n"}}}}
		case rt.path == "/metrics":
			ok["description"] = "Prometheus text format"
			ok["content"] = map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string"}}}
		}
		errResp := map[string]any{"description": "An error", "content": map[string]any{
			"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(apiv1.ErrorResponse{}))}}}
		op["responses"] = map[string]any{"200": ok, "default": errResp}
		if rt.path == ReadyzPath {
			op["responses"].(map[string]any)["503"] = map[string]any{"description": "The store is not usable",
				"content": map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string", "enum": []any{"not ok\n"}}}}}
		}
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		paths[rt.path][strings.ToLower(rt.method)] = op
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":       "drover API",
			"version":     "v1",
			"description": "The API of a drover server. Every request but GET /v1/health, the probes GET /livez and GET /readyz, and GET /v1/openapi.json needs Authorization: Bearer TOKEN (an API token or the server's local token); mutating requests need Content-Type: application/json. See docs/access.md.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas":         g.defs,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
		"security": []any{map[string]any{"bearer": []any{}}},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil { // maps encode with sorted keys
		return nil, err
	}
	return b.Bytes(), nil
}

// operationID names a route's operation: its verb and path, camel-cased
// ("postAppsServicesPush").
func operationID(rt route) string {
	id := strings.ToLower(rt.method)
	parts := regexp.MustCompile(`[A-Za-z]+`).FindAllString(strings.TrimPrefix(rt.path, "/v1"), -1)
	for i, part := range parts {
		if strings.Contains(rt.path, "{"+part+"}") {
			continue
		}
		if i == len(parts)-2 && part == parts[i+1]+"s" && strings.HasSuffix(rt.path, "/{"+parts[i+1]+"}") {
			// One item of a collection ("/releases/{release}"): named
			// in the singular, apart from the collection's own route.
			part = parts[i+1]
		}
		id += strings.ToUpper(part[:1]) + part[1:]
	}
	return id
}

func pathParams(path string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\{([a-z]+)\}`).FindAllStringSubmatch(path, -1) {
		out = append(out, m[1])
	}
	return out
}

func scopeDoc(sc scope) string {
	switch sc {
	case scopeApp:
		return "the application of the path"
	case scopeChannel:
		return "the release channel the body names"
	case scopeSome:
		return "the applications of what it reads or changes (lists show only those)"
	case scopeGlobal:
		return "every application"
	case scopeOpen, scopeSelf:
	}
	return "nothing"
}

func rolesWith(p auth.Permission) []string {
	var out []string
	for _, r := range auth.Roles {
		for _, g := range r.Grants() {
			if g == p {
				out = append(out, string(r))
			}
		}
	}
	return out
}

// schemaGen makes JSON schemas of Go types, named types as components.
type schemaGen struct{ defs map[string]any }

var (
	timeType      = reflect.TypeOf(time.Time{})
	rawType       = reflect.TypeOf(json.RawMessage{})
	errorCodeType = reflect.TypeFor[apiv1.ErrorCode]()
)

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case rawType:
		return map[string]any{"description": "any JSON value"}
	case errorCodeType:
		codes := []any{}
		for _, c := range apiv1.ErrorCodes() {
			codes = append(codes, string(c))
		}
		return map[string]any{"type": "string", "enum": codes}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		// Go writes an empty (nil) list as null.
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte", "nullable": true}
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem()), "nullable": true}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem()), "nullable": true}
	case reflect.Interface:
		return map[string]any{"description": "any JSON value"}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		name := t.Name()
		if _, done := g.defs[name]; !done {
			g.defs[name] = map[string]any{} // a placeholder against recursion
			g.defs[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	default:
		return map[string]any{} // not in the API's types
	}
}

// object is the schema of a struct: its JSON fields, those without
// omitempty or omitzero required.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		if f.Anonymous && tag == "" {
			for k, v := range g.object(f.Type)["properties"].(map[string]any) {
				props[k] = v
			}
			continue
		}
		props[name] = g.schema(f.Type)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			required = append(required, name)
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		out["required"] = required
	}
	return out
}

// serveOpenAPI serves the document.
func (s *Server) serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	doc, err := s.OpenAPI()
	if err != nil {
		writeError(w, s, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}
