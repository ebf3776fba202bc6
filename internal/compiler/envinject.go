package compiler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/ecsspec"
)

// Env injection, as Prodvana does it: the channel's env (the release
// channel's policy.defaultEnv, then the service's env, Env of the compiled
// channel) and Prodvana's metadata variables reach every container of the
// service's workloads, on Kubernetes (unless kubernetesConfig.envInjectionMode
// is ENV_INJECT_DISABLED; never into a Helm chart's objects, as in Prodvana,
// where service env is not for Helm) and on ECS. It runs once the bundle version is
// known, so that PVN_SERVICE_VERSION can be it: what it adds follows from
// what the version hashes (the env, the names, EnvInjectionDisabled) and
// the version itself, so the version stays the hash of the objects without
// it.
//
// Precedence: a variable the container sets itself wins (it is the more
// specific); the PVN_* variables win over channel env of the same name.
// Injected variables come before the container's own, in sorted order, so
// that the container's values can refer to them ($(PVN_SERVICE)).
//
// Secret env is never inlined. On Kubernetes a kubernetesSecret becomes a
// secretKeyRef to its Secret; rawSecret and stored secret references a
// secretKeyRef to the Secret drover keeps for the instance
// (desiredstate.EnvSecretName), which the runtime writes at apply. On ECS
// plain values go to each container definition's environment and secret
// ones are listed in ecsspec.Object.SecretEnv, for the runtime to store in
// AWS Secrets Manager and reference from each container's secrets.

// metadataEnv are the PVN_* variables of a service instance at a version,
// with drover's ids (the custom runtime's): PVN_SERVICE_ID is
// <application>/<service>, PVN_RELEASE_CHANNEL_ID <application>/<release
// channel>, PVN_APPLICATION_ID the application's name.
func metadataEnv(app, svc, rc, version string) map[string]string {
	return map[string]string{
		"PVN_APPLICATION":        app,
		"PVN_APPLICATION_ID":     app,
		"PVN_RELEASE_CHANNEL":    rc,
		"PVN_RELEASE_CHANNEL_ID": app + "/" + rc,
		"PVN_SERVICE":            svc,
		"PVN_SERVICE_ID":         app + "/" + svc,
		"PVN_SERVICE_VERSION":    version,
	}
}

// injectEnv adds the channels' env to the workloads of res, which has its
// bundle version.
func injectEnv(res *Result) error {
	for _, rc := range res.ReleaseChannels {
		meta := metadataEnv(res.Application, res.Service, rc.Name, res.BundleVersion)
		for _, sb := range serviceBackends {
			if sb.inject == nil || sb.compiled != rc.Backend {
				continue
			}
			if err := sb.inject(res, rc, meta); err != nil {
				return fmt.Errorf("release channel %s: %w", rc.Name, err)
			}
		}
	}
	return nil
}

// injectKubernetes injects the channel's env into its workloads (unless
// the service turned injection off).
func injectKubernetes(res *Result, rc *CompiledReleaseChannel, meta map[string]string) error {
	if rc.EnvInjectionDisabled || rc.chart {
		return nil
	}
	env := kubeEnv(rc.Env, meta, desiredstate.EnvSecretName(res.Application, res.Service, rc.Name))
	for i, obj := range rc.Objects {
		if m, ok := obj.(map[string]any); ok {
			rc.Objects[i] = injectWorkload(m, env)
		}
	}
	return nil
}

// kubeEnv is the env injected into Kubernetes containers: EnvVar objects
// by name.
func kubeEnv(env map[string]config.EnvValue, meta map[string]string, ownSecret string) map[string]map[string]any {
	out := make(map[string]map[string]any, len(env)+len(meta))
	for k, v := range env {
		switch {
		case v.KubernetesSecret != nil:
			out[k] = secretRef(k, v.KubernetesSecret.SecretName, v.KubernetesSecret.Key)
		case v.RawSecret != "" || v.Secret != nil:
			out[k] = secretRef(k, ownSecret, k)
		default:
			out[k] = map[string]any{"name": k, "value": v.Value}
		}
	}
	for k, v := range meta {
		out[k] = map[string]any{"name": k, "value": v}
	}
	return out
}

func secretRef(name, secret, key string) map[string]any {
	return map[string]any{"name": name, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": secret, "key": key}}}
}

// podSpecPaths are where the workload kinds keep their pod spec.
var podSpecPaths = map[string][]string{
	"apps/Deployment":        {"spec", "template", "spec"},
	"apps/StatefulSet":       {"spec", "template", "spec"},
	"apps/DaemonSet":         {"spec", "template", "spec"},
	"apps/ReplicaSet":        {"spec", "template", "spec"},
	"batch/Job":              {"spec", "template", "spec"},
	"batch/CronJob":          {"spec", "jobTemplate", "spec", "template", "spec"},
	"/Pod":                   {"spec"},
	"/ReplicationController": {"spec", "template", "spec"},
	"argoproj.io/Rollout":    {"spec", "template", "spec"},
}

// podSpecPath returns where an object of apiVersion and kind keeps the pod
// spec env is injected into (nil when it is not a workload drover injects
// into).
func podSpecPath(apiVersion, kind string) []string {
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.Contains(apiVersion, "/") {
		group = ""
	}
	return podSpecPaths[group+"/"+kind]
}

// injectWorkload returns obj with env added to every container and init
// container of its pod spec; obj itself is not changed (objects may share
// parts with other channels'). Objects that are not workloads, and a
// Rollout without a template (workloadRef), are returned as they are.
func injectWorkload(obj map[string]any, env map[string]map[string]any) map[string]any {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	path := podSpecPath(apiVersion, kind)
	if path == nil {
		return obj
	}
	if _, ok := nested(obj, path); !ok {
		return obj
	}
	out, _ := deepCopy(obj).(map[string]any)
	spec, _ := nested(out, path)
	for _, list := range []string{"initContainers", "containers"} {
		cs, _ := spec[list].([]any)
		for _, c := range cs {
			if cm, ok := c.(map[string]any); ok {
				cm["env"] = withEnv(cm["env"], env)
			}
		}
	}
	return out
}

// withEnv returns the env list existing (a container's env) with the
// variables of env it does not set, sorted, before its own entries.
func withEnv(existing any, env map[string]map[string]any) any {
	own, _ := existing.([]any)
	set := map[string]bool{}
	for _, e := range own {
		if m, ok := e.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				set[n] = true
			}
		}
	}
	out := make([]any, 0, len(env)+len(own))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !set[k] {
			out = append(out, maps.Clone(env[k]))
		}
	}
	return append(out, own...)
}

// nested returns the map at path in obj.
func nested(obj map[string]any, path []string) (map[string]any, bool) {
	cur := obj
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// injectECS adds the plain env and the PVN_* variables to every container
// definition's environment of o's task definition (a variable the
// container sets in environment or secrets wins), and lists the secret env
// in o.SecretEnv. kubernetesSecret env was refused before (checkECSEnv).
func injectECS(o *ecsspec.Object, env map[string]config.EnvValue, meta map[string]string) error {
	plain := maps.Clone(meta)
	var secret []string
	for k, v := range env {
		switch {
		case isMeta(meta, k), v.KubernetesSecret != nil:
		case v.RawSecret != "" || v.Secret != nil:
			secret = append(secret, k)
		default:
			plain[k] = v.Value
		}
	}
	slices.Sort(secret)
	o.SecretEnv = secret
	d := json.NewDecoder(bytes.NewReader(o.TaskDefinition))
	d.UseNumber()
	var task map[string]any
	if err := d.Decode(&task); err != nil {
		return fmt.Errorf("task definition: %w", err)
	}
	defs, _ := task["containerDefinitions"].([]any)
	for _, c := range defs {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		set := map[string]bool{}
		for _, list := range []string{"environment", "secrets"} {
			entries, _ := cm[list].([]any)
			for _, e := range entries {
				if m, ok := e.(map[string]any); ok {
					if n, ok := m["name"].(string); ok {
						set[n] = true
					}
				}
			}
		}
		own, _ := cm["environment"].([]any)
		out := make([]any, 0, len(plain)+len(own))
		for _, k := range slices.Sorted(maps.Keys(plain)) {
			if !set[k] {
				out = append(out, map[string]any{"name": k, "value": plain[k]})
			}
		}
		cm["environment"] = append(out, own...)
	}
	raw, err := json.Marshal(task)
	if err != nil {
		return fmt.Errorf("task definition: %w", err)
	}
	o.TaskDefinition = raw
	return nil
}

func isMeta(meta map[string]string, k string) bool {
	_, ok := meta[k]
	return ok
}

// checkECSEnv refuses kubernetesSecret env on ECS, naming where it comes
// from: a container definition cannot read a Kubernetes Secret.
func (c *rcCompiler) checkECSEnv(merged *serviceForRC) {
	for _, k := range slices.Sorted(maps.Keys(merged.Env)) {
		if merged.Env[k].KubernetesSecret != nil {
			c.fail(Error{Object: c.serviceObject(), Field: "service.env." + k + ".kubernetesSecret",
				Msg: "kubernetesSecret env is for Kubernetes only; on awsEcs use rawSecret or secret (drover stores it in AWS Secrets Manager)"})
		}
	}
	if c.rc.Policy == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(c.rc.Policy.DefaultEnv)) {
		if _, own := merged.Env[k]; !own && c.rc.Policy.DefaultEnv[k].KubernetesSecret != nil {
			c.fail(Error{Object: "application/" + c.in.Application.Name, Field: c.rc.Field + ".policy.defaultEnv." + k + ".kubernetesSecret",
				Msg: fmt.Sprintf("kubernetesSecret env is for Kubernetes only, and service %s runs on awsEcs: set %s in the service's env (rawSecret or secret) to override it", c.in.Service.Name, k)})
		}
	}
}
