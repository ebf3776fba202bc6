package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/drover-dev/drover/api/client"
)

const openAPIFile = "../../api/openapi.json"

// TestOpenAPIDocument: the document made from the route table is a valid
// OpenAPI 3 document, is the checked-in api/openapi.json, and is served at
// GET /v1/openapi.json with no credential.
func TestOpenAPIDocument(t *testing.T) {
	doc, err := OpenAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := openapi3.NewLoader().LoadFromData(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Validate(t.Context()); err != nil {
		t.Fatalf("the document is not valid OpenAPI: %v", err)
	}
	onDisk, err := os.ReadFile(openAPIFile)
	if err != nil || !bytes.Equal(onDisk, doc) {
		t.Errorf("api/openapi.json is not the route table's document (%v): run make generate", err)
	}
	s, _ := newPushedServer(t)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/openapi.json", nil))
	if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), doc) {
		t.Errorf("GET /v1/openapi.json: %d, %d bytes", rec.Code, rec.Body.Len())
	}
}

// TestClientFollowsOpenAPI calls every method of the Go client against a
// server that checks each request against the document (path, query,
// body) and answers with the route's declared answer type: every request
// must be valid, its body of the route's request type, the method's result
// of the route's answer type, and every route but /metrics, the probes and the
// document itself reached by some method.
func TestClientFollowsOpenAPI(t *testing.T) {
	raw, err := OpenAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	table := (&Server{}).routeTable()
	type compiled struct {
		rt route
		re *regexp.Regexp
	}
	var routes []compiled
	for _, rt := range table {
		re := regexp.QuoteMeta(rt.path)
		re = regexp.MustCompile(`\\\{[a-z]+\\\}`).ReplaceAllString(re, `[^/:]+`)
		routes = append(routes, compiled{rt, regexp.MustCompile("^" + rt.method + " " + re + "$")})
	}
	var (
		mu      sync.Mutex
		reached = map[string]route{} // client method -> route
		current string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		method := current
		mu.Unlock()
		var rt *route
		for _, c := range routes {
			if c.re.MatchString(r.Method + " " + r.URL.Path) {
				rt = &c.rt
				break
			}
		}
		if rt == nil {
			t.Errorf("%s: %s %s is no route", method, r.Method, r.URL.Path)
			http.Error(w, "no route", http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		params := map[string]string{}
		names := pathParams(rt.path)
		parts, tmpl := strings.Split(r.URL.Path, "/"), strings.Split(rt.path, "/")
		for i, p := range tmpl {
			if i < len(parts) && strings.HasPrefix(p, "{") {
				end := strings.Index(p, "}")
				v := parts[i]
				if suffix := p[end+1:]; suffix != "" {
					v = strings.TrimSuffix(v, suffix)
				}
				params[p[1:end]] = v
			}
		}
		if len(params) != len(names) {
			t.Errorf("%s: path parameters %v of %s", method, params, rt.path)
		}
		item := spec.Paths.Find(rt.path)
		op := item.GetOperation(rt.method)
		in := &openapi3filter.RequestValidationInput{
			Request: r, PathParams: params,
			Route:   &routers.Route{Spec: spec, Path: rt.path, PathItem: item, Method: rt.method, Operation: op},
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		}
		if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
			t.Errorf("%s: %s %s does not follow the document: %v", method, r.Method, r.URL.Path, err)
		}
		if rt.req != nil && len(body) > 0 {
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			v := reflect.New(reflect.TypeOf(rt.req)).Interface()
			if err := dec.Decode(v); err != nil {
				t.Errorf("%s: its body is not a %T: %v", method, rt.req, err)
			}
		}
		mu.Lock()
		reached[method] = *rt
		mu.Unlock()
		switch {
		case rt.path == "/v1/watch":
			w.Header().Set("Content-Type", "text/event-stream")
		case rt.resp != nil:
			w.Header().Set("Content-Type", "application/json")
			v := reflect.New(reflect.TypeOf(rt.resp))
			emptyLists(v.Elem())
			_ = json.NewEncoder(w).Encode(v.Interface())
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{}\n"))
		}
	}))
	defer srv.Close()

	c := client.New(srv.URL, client.WithToken("t"))
	cv := reflect.ValueOf(c)
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	errType := reflect.TypeOf((*error)(nil)).Elem()
	for i := range cv.NumMethod() {
		m := cv.Type().Method(i)
		mt := cv.Method(i).Type()
		if mt.NumIn() == 0 || mt.In(0) != ctxType {
			continue // not a request
		}
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		args := []reflect.Value{reflect.ValueOf(ctx)}
		for j := 1; j < mt.NumIn(); j++ {
			in := mt.In(j)
			switch in.Kind() {
			case reflect.String:
				args = append(args, reflect.ValueOf("x").Convert(in))
			case reflect.Int, reflect.Int64:
				args = append(args, reflect.ValueOf(1).Convert(in))
			case reflect.Bool:
				args = append(args, reflect.ValueOf(true))
			case reflect.Func:
				args = append(args, reflect.MakeFunc(in, func([]reflect.Value) []reflect.Value {
					return []reflect.Value{reflect.Zero(errType)}
				}))
			default:
				args = append(args, reflect.Zero(in))
			}
		}
		mu.Lock()
		current = m.Name
		mu.Unlock()
		call := cv.Method(i).Call
		if mt.IsVariadic() {
			call = cv.Method(i).CallSlice // the last argument is the slice
		}
		out := call(args)
		cancel()
		mu.Lock()
		rt, ok := reached[m.Name]
		mu.Unlock()
		if !ok {
			t.Errorf("client.%s reached no route", m.Name)
			continue
		}
		if err, _ := out[len(out)-1].Interface().(error); err != nil && rt.path != "/v1/watch" {
			t.Errorf("client.%s against its route %s %s: %v", m.Name, rt.method, rt.path, err)
		}
		if len(out) == 2 && rt.resp != nil {
			if got, want := mt.Out(0), reflect.PointerTo(reflect.TypeOf(rt.resp)); got != want {
				t.Errorf("client.%s returns %v; its route %s %s answers %v", m.Name, got, rt.method, rt.path, want)
			}
		}
	}
	used := map[string]bool{}
	for _, rt := range reached {
		used[rt.method+" "+rt.path] = true
	}
	for _, rt := range table {
		key := rt.method + " " + rt.path
		// A browser, not a client, signs in at /v1/auth/login and comes
		// back to /v1/auth/callback.
		browser := rt.path == "/v1/auth/login" || rt.path == "/v1/auth/callback" || rt.path == "/v1/auth/token"
		// Slack, not a client, posts the clicks of its buttons.
		browser = browser || rt.path == "/v1/slack/interactions"
		if !used[key] && rt.path != "/metrics" && rt.path != "/v1/openapi.json" && !isProbe(rt.path) && !browser {
			t.Errorf("no client method calls %s", key)
		}
	}
}

// emptyLists sets the nil slices of v (a struct's, recursively) to empty
// ones, as the server writes lists.
func emptyLists(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				emptyLists(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.IsNil() && v.CanSet() && v.Type().Elem().Kind() != reflect.Uint8 {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		}
	default:
	}
}
