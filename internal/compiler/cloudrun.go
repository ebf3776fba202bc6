package compiler

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/drover-dev/drover/internal/cloudrunspec"
	"github.com/drover-dev/drover/internal/config"
)

func init() {
	registerBackend(serviceBackend{
		name: "googleCloudRun", accepted: config.BackendGoogleCloudRun, compiled: cloudrunspec.Kind,
		set: func(b *config.ServiceBackend) bool { return b.GoogleCloudRun != nil },
		compile: func(c *rcCompiler, field string, m *serviceForRC, rt *config.Runtime, data *Data, out *CompiledReleaseChannel) {
			out.Backend = cloudrunspec.Kind
			c.checkCloudRunEnv(m)
			if obj := c.googleCloudRun(field+".googleCloudRun", m.Backend.GoogleCloudRun, rt, data); obj != nil {
				out.Objects = []any{obj}
			}
		},
		inject: func(_ *Result, rc *CompiledReleaseChannel, meta map[string]string) error {
			for _, obj := range rc.Objects {
				if o, ok := obj.(*cloudrunspec.Object); ok {
					if err := injectCloudRun(o, rc.Env, meta); err != nil {
						return err
					}
				}
			}
			return nil
		},
	})
}

// googleCloudRun renders a service's Knative Service for the channel
// (templates over the service's data), decodes it strictly and translates
// it to the Cloud Run v2 API's shape for the runtime's project and region,
// so a field drover does not map fails here, naming the file and line.
func (c *rcCompiler) googleCloudRun(field string, g *config.GoogleCloudRunConfig, rt *config.Runtime, data *Data) *cloudrunspec.Object {
	text, where := g.Inlined, field+".inlined"
	if g.Tree != nil {
		var ok bool
		if text, ok = c.treeText(field, &config.KubernetesConfig{Tree: g.Tree}, data); !ok {
			return nil
		}
		where = field + ".local"
	}
	rendered := text
	if !g.Literal {
		var ok bool
		if rendered, ok = c.renderText(where, text, data); !ok {
			return nil
		}
	}
	fail := func(line int, msg string) {
		e := Error{Object: c.serviceObject(), Field: where, Msg: msg}
		if file, fline := config.LocateSource(rendered, line); file != "" {
			e.File, e.Line, e.Field = file, fline, field+".local" // read from local.path
		} else if line > 0 {
			e.Msg = fmt.Sprintf("line %d: %s", line, msg)
		}
		c.fail(e)
	}
	k, err := cloudrunspec.Decode([]byte(rendered))
	if err == nil {
		project, region := "", ""
		if rt != nil && rt.GoogleCloudRun != nil {
			project, region = rt.GoogleCloudRun.Project, rt.GoogleCloudRun.Region
		}
		_, err = k.Translate(project, region)
	}
	if err != nil {
		var se *cloudrunspec.Error
		if errors.As(err, &se) {
			msg := se.Msg
			if se.Field != "" {
				msg = se.Field + ": " + msg
			}
			fail(se.Line, "invalid Knative Service: "+msg)
		} else {
			fail(0, err.Error())
		}
		return nil
	}
	svc, err := cloudrunspec.ServiceJSON(k)
	if err != nil {
		fail(0, err.Error())
		return nil
	}
	name := ""
	if rt != nil {
		name = rt.Name
	}
	return &cloudrunspec.Object{Kind: cloudrunspec.Kind, Runtime: name, ServiceName: k.Metadata.Name, Service: svc}
}

// injectCloudRun adds the channel's plain env and drover's PVN_* variables
// to every container of the Knative Service; a variable the container
// sets itself wins.
func injectCloudRun(o *cloudrunspec.Object, env map[string]config.EnvValue, meta map[string]string) error {
	k, err := cloudrunspec.ParseObject(*o)
	if err != nil {
		return fmt.Errorf("knative service: %w", err)
	}
	plain := maps.Clone(meta)
	for name, v := range env {
		if !isMeta(meta, name) && v.RawSecret == "" && v.Secret == nil && v.KubernetesSecret == nil {
			plain[name] = v.Value
		}
	}
	for i := range k.Spec.Template.Spec.Containers {
		ct := &k.Spec.Template.Spec.Containers[i]
		set := map[string]bool{}
		for _, e := range ct.Env {
			set[e.Name] = true
		}
		var add []cloudrunspec.EnvVar
		for _, name := range slices.Sorted(maps.Keys(plain)) {
			if !set[name] {
				add = append(add, cloudrunspec.EnvVar{Name: name, Value: plain[name]})
			}
		}
		ct.Env = append(add, ct.Env...)
	}
	out, err := cloudrunspec.ServiceJSON(k)
	if err != nil {
		return err
	}
	o.Service = out
	return nil
}

// checkCloudRunEnv refuses secret env for Cloud Run services, naming where
// it comes from: drover does not keep secrets in Secret Manager yet, and
// never puts a secret in a revision's plain env.
func (c *rcCompiler) checkCloudRunEnv(merged *serviceForRC) {
	for _, k := range slices.Sorted(maps.Keys(merged.Env)) {
		if v := merged.Env[k]; v.KubernetesSecret != nil || v.RawSecret != "" || v.Secret != nil {
			c.fail(Error{Object: c.serviceObject(), Field: "service.env." + k,
				Msg: "secret env is not supported on googleCloudRun yet (drover would have to keep it in Secret Manager): use plain env"})
		}
	}
	if c.rc.Policy == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(c.rc.Policy.DefaultEnv)) {
		if v := c.rc.Policy.DefaultEnv[k]; (v.KubernetesSecret != nil || v.RawSecret != "" || v.Secret != nil) && !own(merged.Env, k) {
			c.fail(Error{Object: "application/" + c.in.Application.Name, Field: c.rc.Field + ".policy.defaultEnv." + k,
				Msg: fmt.Sprintf("secret env is not supported on googleCloudRun yet, and service %s runs on googleCloudRun: set %s in the service's env as plain env to override it", c.in.Service.Name, k)})
		}
	}
}

func own(env map[string]config.EnvValue, k string) bool {
	_, ok := env[k]
	return ok
}
