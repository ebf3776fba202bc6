package compiler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/config"
)

// InputFor builds the compile input of one service from a config set.
func InputFor(set *config.Set, key config.ServiceKey) (Input, error) {
	src, ok := set.Services[key]
	if !ok {
		var names []string
		for _, k := range set.ServiceKeys() {
			if k.Application == key.Application {
				names = append(names, k.Service)
			}
		}
		hint := ""
		if len(names) > 0 {
			hint = " (services: " + strings.Join(names, ", ") + ")"
		}
		return Input{}, fmt.Errorf("no service %q in application %q among the given configs%s", key.Service, key.Application, hint)
	}
	app := set.ApplicationConfig(key.Application)
	if app == nil {
		return Input{}, fmt.Errorf("no application %q among the given configs", key.Application)
	}
	return Input{
		Application:        app,
		Runtimes:           set.RuntimeConfigs(),
		Protections:        set.ProtectionConfigs(),
		DeliveryExtensions: set.DeliveryExtensionConfigs(),
		Registries:         set.RegistryConfigs(),
		Service:            src.File.Service,
	}, nil
}

// ValidateSet runs the config checks and then compiles every service for every
// release channel, with stand-in values for required parameters that have no
// default, so that template errors, missing keys, group expansion and runtime
// selection are found before anything is pushed. Every problem is returned,
// located; an error of a channel rendered with stand-ins names them (see
// ValidateOptions.Params).
func ValidateSet(set *config.Set) config.ErrorList {
	return ValidateSetContext(context.Background(), set)
}

// ValidateOptions are the values a validation renders with.
type ValidateOptions struct {
	// Params are given values (`drover validate --param`): each goes to
	// every service with a parameter of its name (a per-channel value to
	// those whose application has that release channel). A required
	// parameter still without a value or a default is rendered with a
	// stand-in of its type, and the errors of that channel say so.
	Params []ParamValue
}

// UnusedParams returns the names of params that no service of set has a
// parameter of: a mistyped name would otherwise be ignored.
func UnusedParams(set *config.Set, params []ParamValue) []string {
	known := map[string]bool{}
	for _, src := range set.Services {
		for _, def := range src.File.Service.Parameters {
			known[def.Name] = true
		}
	}
	var out []string
	for _, pv := range params {
		if !known[pv.Name] && !slices.Contains(out, pv.Name) {
			out = append(out, pv.Name)
		}
	}
	return out
}

// ValidateSetContext is ValidateSet bounded by ctx: template rendering stops
// when ctx is done (the server passes the request's context). The whole
// validation, every service together, takes at most MaxCompileTime; it stops
// at the first service that runs out of time. Each service's compilation has
// its own output budget (MaxCompileOutput): its result is dropped before the
// next one is compiled.
func ValidateSetContext(ctx context.Context, set *config.Set) config.ErrorList {
	return ValidateSetWith(ctx, set, ValidateOptions{})
}

// ValidateSetWith is ValidateSetContext with given parameter values.
func ValidateSetWith(ctx context.Context, set *config.Set, opts ValidateOptions) config.ErrorList {
	errs := set.Validate()
	if len(errs) > 0 {
		// Compiling a structurally broken set would mostly repeat these errors.
		return errs
	}
	ctx, cancel := context.WithTimeout(ctx, MaxCompileTime)
	defer cancel()
	var cerrs Errors
	channels := map[string]map[string]bool{} // application -> its release channels
	for _, src := range set.Applications {
		if ctx.Err() != nil {
			break // reported below, at the first service
		}
		app := set.ApplicationConfig(src.Name())
		rcs, expandErrs := ExpandReleaseChannels(ctx, app, set.RuntimeConfigs())
		cerrs = append(cerrs, expandErrs...)
		channels[src.Name()] = map[string]bool{}
		for _, rc := range rcs {
			channels[src.Name()][rc.Name] = true
		}
	}
	for _, key := range set.ServiceKeys() {
		if err := ctx.Err(); err != nil {
			// The first service past the deadline is reported; the others
			// would repeat it.
			reason := "the request was cancelled"
			if errors.Is(err, context.DeadlineExceeded) {
				reason = fmt.Sprintf("the validation ran out of time (all services share at most %s)", MaxCompileTime)
			}
			errs = append(errs, set.Services[key].Errorf("service", "not validated: %s", reason))
			break
		}
		in, err := InputFor(set, key)
		if err != nil {
			errs = append(errs, set.Services[key].Errorf("service", "%v", err))
			continue
		}
		in.Placeholders = true
		in.Params = paramsFor(in.Service, channels[key.Application], opts.Params)
		if _, err := CompileContext(ctx, in); err != nil {
			var ce Errors
			if !errors.As(err, &ce) {
				errs = append(errs, set.Services[key].Errorf("service", "%v", err))
				continue
			}
			cerrs = append(cerrs, ce...)
		}
	}
	return append(errs, Locate(set, cerrs)...)
}

// paramsFor keeps the given values that are parameters of svc, and for one
// release channel, of a channel among rcs.
func paramsFor(svc *config.Service, rcs map[string]bool, given []ParamValue) []ParamValue {
	var out []ParamValue
	for _, pv := range given {
		if !slices.ContainsFunc(svc.Parameters, func(d config.ParameterDefinition) bool { return d.Name == pv.Name }) {
			continue
		}
		if pv.ReleaseChannel != "" && !rcs[pv.ReleaseChannel] {
			continue
		}
		out = append(out, pv)
	}
	return out
}

// Locate turns compiler errors into located config errors. The same problem
// found in several release channels is reported once.
func Locate(set *config.Set, cerrs []Error) config.ErrorList {
	var out config.ErrorList
	seen := map[string]bool{}
	for _, e := range cerrs {
		key := e.Object + "\x00" + e.Field + "\x00" + e.File + "\x00" + fmt.Sprint(e.Line) + "\x00" + e.Msg
		if seen[key] {
			continue
		}
		seen[key] = true
		msg := e.Msg
		if e.ReleaseChannel != "" {
			msg = "release channel " + e.ReleaseChannel + ": " + msg
		}
		if e.File != "" {
			out = append(out, &config.Error{File: e.File, Line: e.Line, Column: 1, Field: e.Field, Msg: msg})
			continue
		}
		src := sourceOf(set, e.Object)
		if src == nil {
			out = append(out, &config.Error{File: e.Object, Field: e.Field, Msg: msg})
			continue
		}
		// msg is bounded already (clipMessage); Errorf would clip it to a
		// quoted value's length, cutting off the cause.
		pos := src.Locate(e.Field)
		out = append(out, &config.Error{File: src.Path, Line: pos.Line, Column: pos.Column, Field: e.Field, Msg: msg})
	}
	return out
}

func sourceOf(set *config.Set, object string) *config.Source {
	kind, name, _ := strings.Cut(object, "/")
	switch kind {
	case "application":
		return set.Applications[name]
	case "runtime":
		return set.Runtimes[name]
	case "service":
		app, svc, _ := strings.Cut(name, "/")
		return set.Services[config.ServiceKey{Application: app, Service: svc}]
	}
	return nil
}
