package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// storedName is the name a config is stored under: services and standalone
// release channels are scoped by their application.
func storedName(src *config.Source) string {
	f := src.File
	switch {
	case f.Service != nil:
		return f.Service.Application + "/" + f.Service.Name
	case f.ReleaseChannel != nil:
		return f.ReleaseChannel.Application + "/" + f.ReleaseChannel.Name
	}
	return src.Name()
}

// canonical returns the config's canonical JSON and its hash.
func canonical(f *config.File) ([]byte, string, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(body)
	return body, hex.EncodeToString(sum[:]), nil
}

// decodeCache keeps the decoded form of the newest version of each stored
// config it was asked for, by kind and name: a new version replaces the
// entry, so the cache holds at most one version per config (B10: it used to
// keep every version it ever decoded, each as large as its config).
//
// Service configs are decoded each time instead: there is one per service,
// each is needed by its own pushes only (and by applies, which validate
// against every stored config), and keeping them all decoded made the
// garbage collector walk them at every cycle for as long as the server ran.
// At 10,000 services (drover bench, 10 channels) keeping them cost the
// collector 4.3-4.7 s of CPU instead of 3.3-3.6 s and the run about 4% more
// time, where decoding one again takes about 70 µs, against about half a
// millisecond to compile it at its push.
type decodeCache struct {
	mu sync.Mutex
	m  map[string]decoded
}

type decoded struct {
	version int64
	src     *config.Source
}

func (c *decodeCache) source(obj store.ConfigObject) (*config.Source, error) {
	key := obj.Kind + "\x00" + obj.Name
	keep := obj.Kind != "service"
	if keep {
		c.mu.Lock()
		d, ok := c.m[key]
		c.mu.Unlock()
		if ok && d.version == obj.Version {
			return d.src, nil
		}
	}
	name := obj.Source
	if name == "" {
		name = obj.Kind + "/" + obj.Name
	}
	dec, err := config.DecodeInternal(name, obj.Body)
	if err != nil {
		return nil, fmt.Errorf("stored %s %s version %d: %w", obj.Kind, obj.Name, obj.Version, err)
	}
	src := &config.Source{Path: name, Decoded: dec}
	if !keep {
		return src, nil
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]decoded{}
	}
	// An older version asked for late (a push racing an apply) does not
	// evict the newer one.
	if cur, ok := c.m[key]; !ok || cur.version < obj.Version {
		c.m[key] = decoded{version: obj.Version, src: src}
	}
	c.mu.Unlock()
	return src, nil
}

// len returns the number of cached configs.
func (c *decodeCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// storedSources returns the latest version of every stored config of the
// given kinds (none: of every config kind, config.KindNames; the store's
// internal kinds, such as freezes, are never configs).
func (s *Server) storedSources(ctx context.Context, kinds ...string) ([]*config.Source, map[string]int64, error) {
	if len(kinds) == 0 {
		kinds = config.KindNames()
	}
	objs, err := s.store.ListConfigs(ctx, kinds...)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*config.Source, 0, len(objs))
	versions := map[string]int64{}
	for _, obj := range objs {
		src, err := s.cache.source(obj)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, src)
		versions[obj.Kind+"/"+obj.Name] = obj.Version
	}
	if slices.Contains(kinds, "runtime") {
		if out, err = s.linkedSources(ctx, out); err != nil {
			return nil, nil, err
		}
	}
	return out, versions, nil
}

// applyConfigs validates the request's configs together with the stored ones
// and stores them only when everything is valid.
func (s *Server) applyConfigs(ctx context.Context, req apiv1.ApplyConfigsRequest) (*apiv1.ApplyConfigsResponse, error) {
	if len(req.Configs) == 0 {
		return nil, errorf(apiv1.CodeInvalidArgument, "no configs given")
	}
	user, err := requestUser(ctx, req.User)
	if err != nil {
		return nil, err
	}
	req.User = user
	var (
		incoming []*config.Source
		details  []apiv1.ConfigError
	)
	seen := map[string]string{}
	for i, c := range req.Configs {
		name := c.Source
		if name == "" {
			name = fmt.Sprintf("configs[%d]", i)
		}
		dec, err := config.DecodeInternal(name, c.Body)
		if err != nil {
			details = append(details, toDetails(err)...)
			continue
		}
		src := &config.Source{Path: name, Decoded: dec}
		key := src.Kind() + "/" + storedName(src)
		if prev, dup := seen[key]; dup {
			details = append(details, apiv1.ConfigError{File: name, Field: src.Kind() + ".name", Message: fmt.Sprintf("%s %q is also defined in %s", src.Kind(), src.Name(), prev)})
			continue
		}
		seen[key] = name
		incoming = append(incoming, src)
	}
	if len(details) == 0 {
		linked, err := s.linkedConflicts(ctx, incoming)
		if err != nil {
			return nil, err
		}
		details = linked
	}
	if len(details) > 0 {
		return nil, &validationError{details: details}
	}
	names := make([]string, 0, len(incoming))
	for _, src := range incoming {
		names = append(names, src.Kind()+" "+storedName(src))
	}
	noteAudit(ctx, "configs "+strings.Join(names, ", "))
	// Each config needs configure on its application; those of none
	// (runtimes, protections, extensions) on every application.
	for _, src := range incoming {
		if err := allow(ctx, auth.PermConfigure, configApplication(src.Kind(), storedName(src)), ""); err != nil {
			return nil, fmt.Errorf("%s %s (%s): %w", src.Kind(), src.Name(), src.Path, err)
		}
	}
	stored, _, err := s.storedSources(ctx)
	if err != nil {
		return nil, err
	}
	all := append([]*config.Source(nil), incoming...)
	for _, src := range stored {
		if _, replaced := seen[src.Kind()+"/"+storedName(src)]; !replaced {
			all = append(all, src)
		}
	}
	set, errs := config.NewSet(all)
	if len(errs) == 0 {
		errs = compiler.ValidateSetContext(ctx, set)
	}
	if len(errs) > 0 {
		return nil, &validationError{details: toDetails(errs.Err())}
	}
	if err := s.checkRuntimeSecrets(ctx, incoming); err != nil {
		return nil, err
	}
	if err := s.checkSlackTargets(ctx, incoming); err != nil {
		return nil, err
	}
	hooks, err := s.webhookTargets(ctx, incoming, req.User)
	if err != nil {
		return nil, err
	}
	resp := &apiv1.ApplyConfigsResponse{}
	var objs []store.ConfigObject
	for _, src := range incoming {
		body, hash, err := canonical(src.File)
		if err != nil {
			return nil, err
		}
		res := apiv1.ConfigResult{Kind: src.Kind(), Name: storedName(src), Source: src.Path, Action: "unchanged"}
		if req.DryRun {
			prev, err := s.store.GetConfig(ctx, res.Kind, res.Name)
			switch {
			case errors.Is(err, store.ErrNotFound):
				res.Action = "created"
			case err != nil:
				return nil, err
			case prev.Hash != hash:
				res.Action, res.Version = "configured", prev.Version+1
			default:
				res.Version = prev.Version
			}
		}
		resp.Results = append(resp.Results, res)
		objs = append(objs, store.ConfigObject{Kind: res.Kind, Name: res.Name, Body: body, Hash: hash, Source: src.Path})
	}
	if req.DryRun {
		return resp, nil
	}
	// Every config and its event in one transaction: an apply that fails
	// leaves none of its configs stored.
	put, err := s.store.PutConfigs(ctx, objs, func(obj store.ConfigObject) store.Event {
		app, svc := splitApp(obj.Kind, obj.Name)
		ev := store.Event{Application: app, Type: ds.EventConfigured, Actor: req.User,
			Message: fmt.Sprintf("%s/%s %s (version %d)", obj.Kind, obj.Name, createdAction(obj), obj.Version)}
		if obj.Kind == "service" {
			ev.Service = svc
		}
		return ev
	})
	if err != nil {
		return nil, err
	}
	for i, p := range put {
		resp.Results[i].Version = p.Config.Version
		if p.Created {
			resp.Results[i].Action = createdAction(p.Config)
		}
	}
	if err := s.syncSlackTargets(ctx, incoming, req.User); err != nil {
		return nil, err
	}
	for _, t := range hooks {
		if err := s.store.PutNotifyTarget(ctx, t); err != nil {
			return nil, fmt.Errorf("notification target %s: %w", t.Name, err)
		}
	}
	s.runtimes.Invalidate()
	s.changed.notify()
	return resp, nil
}

// createdAction is the action of a config version just stored.
func createdAction(obj store.ConfigObject) string {
	if obj.Version == 1 {
		return "created"
	}
	return "configured"
}

func splitApp(kind, name string) (string, string) {
	switch kind {
	case "application":
		return name, ""
	case "service", "releaseChannel":
		for i := range len(name) {
			if name[i] == '/' {
				return name[:i], name[i+1:]
			}
		}
	}
	return "", name
}

// validationError carries located config problems to the client.
type validationError struct {
	details []apiv1.ConfigError
}

func (e *validationError) Error() string {
	return fmt.Sprintf("%d config problem(s)", len(e.details))
}

func toDetails(err error) []apiv1.ConfigError {
	l, ok := config.AsErrorList(err)
	if !ok {
		return []apiv1.ConfigError{{Message: err.Error()}}
	}
	out := make([]apiv1.ConfigError, len(l))
	for i, e := range l {
		// Positions refer to the JSON the server decoded, which the user never
		// saw: the client maps Field back to its own file.
		out[i] = apiv1.ConfigError{File: e.File, Field: e.Field, Message: e.Msg}
	}
	return out
}

func (s *Server) listConfigs(ctx context.Context, kind string) (*apiv1.ConfigList, error) {
	// Only configs: the store's internal kinds (freezes) have lists of
	// their own, filtered by who may see them.
	kinds := config.KindNames()
	if kind != "" {
		if !slices.Contains(kinds, kind) {
			return nil, errorf(apiv1.CodeInvalidArgument, "kind %q is not a config kind (one of %s)", kind, strings.Join(kinds, ", "))
		}
		kinds = []string{kind}
	}
	objs, err := s.store.ListConfigs(ctx, kinds...)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ConfigList{Configs: []apiv1.ConfigInfo{}}
	for _, o := range objs {
		if !visible(ctx, configApplication(o.Kind, o.Name)) {
			continue
		}
		out.Configs = append(out.Configs, apiv1.ConfigInfo{Kind: o.Kind, Name: o.Name, Version: o.Version, Source: o.Source, CreatedAt: o.CreatedAt})
	}
	sort.Slice(out.Configs, func(i, j int) bool {
		a, b := out.Configs[i], out.Configs[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	return out, nil
}

// configApplication is the application a stored config belongs to, ""
// for those of none (runtimes, protections, extensions): an application is
// named by itself, services and standalone release channels
// "<application>/<name>".
func configApplication(kind, name string) string {
	if kind == "application" {
		return name
	}
	if app, _, ok := strings.Cut(name, "/"); ok {
		return app
	}
	return ""
}

// compileInput gathers the stored configs one service's compilation needs.
func (s *Server) compileInput(ctx context.Context, app, svc string) (compiler.Input, int64, error) {
	var srcs []*config.Source
	appObj, err := s.store.GetConfig(ctx, "application", app)
	if errors.Is(err, store.ErrNotFound) {
		return compiler.Input{}, 0, errorf(apiv1.CodeNotFound, "application %q is not configured", app)
	}
	if err != nil {
		return compiler.Input{}, 0, err
	}
	svcObj, err := s.store.GetConfig(ctx, "service", app+"/"+svc)
	if errors.Is(err, store.ErrNotFound) {
		return compiler.Input{}, 0, errorf(apiv1.CodeNotFound, "service %q of application %q is not configured", svc, app)
	}
	if err != nil {
		return compiler.Input{}, 0, err
	}
	for _, obj := range []store.ConfigObject{appObj, svcObj} {
		src, err := s.cache.source(obj)
		if err != nil {
			return compiler.Input{}, 0, err
		}
		srcs = append(srcs, src)
	}
	// The configs of every other kind, with one query, in the order of
	// config.KindNames (linked runtimes after the configured ones), as
	// the compiler has always been given them.
	kinds := config.KindNames()
	others := slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k == "application" || k == "service" })
	more, _, err := s.storedSources(ctx, others...)
	if err != nil {
		return compiler.Input{}, 0, err
	}
	slices.SortStableFunc(more, func(a, b *config.Source) int {
		return cmp.Compare(slices.Index(kinds, a.Kind()), slices.Index(kinds, b.Kind()))
	})
	srcs = append(srcs, more...)
	set, errs := config.NewSet(srcs)
	if len(errs) > 0 {
		return compiler.Input{}, 0, &validationError{details: toDetails(errs.Err())}
	}
	in, err := compiler.InputFor(set, config.ServiceKey{Application: app, Service: svc})
	if err != nil {
		return compiler.Input{}, 0, errorf(apiv1.CodeNotFound, "%v", err)
	}
	// Charts render against what the clusters last said of themselves.
	facts, err := s.store.ListRuntimeFacts(ctx)
	if err != nil {
		return compiler.Input{}, 0, err
	}
	for _, f := range facts {
		if in.Clusters == nil {
			in.Clusters = map[string]compiler.ClusterFacts{}
		}
		in.Clusters[f.Runtime] = compiler.ClusterFacts{KubeVersion: f.KubeVersion, APIVersions: f.APIVersions}
	}
	return in, svcObj.Version, nil
}

// listRuntimes lists the configured and linked runtimes with what they
// last reported about their backends and the state of their agents (read
// from the store: no runtime is asked).
func (s *Server) listRuntimes(ctx context.Context) (*apiv1.RuntimeList, error) {
	objs, err := s.store.ListConfigs(ctx, "runtime")
	if err != nil {
		return nil, err
	}
	facts, err := s.store.ListRuntimeFacts(ctx)
	if err != nil {
		return nil, err
	}
	linked, err := s.store.ListLinkedRuntimes(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*apiv1.RuntimeInfo{}
	get := func(name string) *apiv1.RuntimeInfo {
		if info, ok := byName[name]; ok {
			return info
		}
		info := &apiv1.RuntimeInfo{Name: name}
		byName[name] = info
		return info
	}
	for _, o := range objs {
		info := get(o.Name)
		info.Configured = true
		var f config.File
		if err := json.Unmarshal(o.Body, &f); err == nil && f.Runtime != nil {
			kind := f.Runtime.KindFacts()
			info.Kind = kind.Name
			if kind.Proxy != nil {
				info.Via = kind.Proxy(f.Runtime, false)
			}
			for _, l := range f.Runtime.Labels {
				if info.Labels == nil {
					info.Labels = map[string]string{}
				}
				info.Labels[l.Label] = l.Value
			}
		}
	}
	now := s.now()
	for _, l := range linked {
		info := get(l.Name)
		info.Linked = true
		if info.Kind == "" {
			// A linked runtime without a config: a cluster, or a host
			// that runs the commands of other runtimes.
			info.Kind = "kubernetes"
			if l.Agent.Mode == "commands" {
				info.Kind = "commands"
			}
		}
		for k, v := range l.Labels {
			if info.Labels == nil {
				info.Labels = map[string]string{}
			}
			if _, set := info.Labels[k]; !set {
				info.Labels[k] = v
			}
		}
		info.Agent = s.describeAgent(l, now)
	}
	for _, f := range facts {
		if info, ok := byName[f.Runtime]; ok {
			info.KubeVersion, info.APIVersions, info.ObservedAt = f.KubeVersion, f.APIVersions, f.ObservedAt
		}
	}
	out := &apiv1.RuntimeList{Runtimes: make([]apiv1.RuntimeInfo, 0, len(byName))}
	for _, info := range byName {
		out.Runtimes = append(out.Runtimes, *info)
	}
	sort.Slice(out.Runtimes, func(i, j int) bool { return out.Runtimes[i].Name < out.Runtimes[j].Name })
	return out, nil
}

// parameters answers GET /v1/apps/{app}/services/{svc}/parameters from the
// service's latest config: what a push form asks for.
func (s *Server) parameters(ctx context.Context, app, svc string) (*apiv1.ParameterList, error) {
	obj, err := s.store.GetConfig(ctx, "service", app+"/"+svc)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(apiv1.CodeNotFound, "no service %q in application %q", svc, app)
	}
	if err != nil {
		return nil, err
	}
	src, err := s.cache.source(obj)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ParameterList{Parameters: []apiv1.ParameterInfo{}}
	if src.File.Service == nil {
		return out, nil
	}
	for _, p := range src.File.Service.Parameters {
		info := apiv1.ParameterInfo{Name: p.Name, Description: p.Description, Required: p.Required, Type: "string"}
		switch {
		case p.Secret != nil:
			info.Type = "secret"
		case p.Int != nil:
			info.Type = "int"
			if p.Int.DefaultValue != nil {
				info.Default = fmt.Sprint(int64(*p.Int.DefaultValue))
			}
		case p.DockerImage != nil:
			info.Type, info.Default = "dockerImage", p.DockerImage.DefaultTag
			if ri := p.DockerImage.ImageRegistryInfo; ri != nil {
				info.Image = ri.ImageRepository
			}
		case p.Commit != nil:
			info.Type = "commit"
		case p.Blob != nil:
			info.Type = "blob"
		case p.String != nil:
			info.Default = p.String.DefaultValue
		}
		out.Parameters = append(out.Parameters, info)
	}
	return out, nil
}
