package config

import (
	"fmt"
	"regexp"
)

// The built-in runtime kinds' validation hooks (RuntimeKind.validate): each
// checks its own section of a runtime config.

// kubernetesRuntime checks a kubernetes section.
func (v *validator) kubernetesRuntime(src *Source, rt *Runtime) {
	if k := rt.Kubernetes; k != nil {
		if k.KubeVersion != "" && !kubeVersionRE.MatchString(k.KubeVersion) {
			v.add(src, "runtime.kubernetes.kubeVersion", "%q is not a Kubernetes version (like 1.31 or v1.31.2)", k.KubeVersion)
		}
		for i, av := range k.APIVersions {
			if !apiVersionRE.MatchString(av) {
				v.add(src, fmt.Sprintf("runtime.kubernetes.apiVersions[%d]", i), "%q is not an API version (like monitoring.coreos.com/v1 or monitoring.coreos.com/v1/ServiceMonitor)", av)
			}
		}
	}
}

// fakeRuntime checks a fake section.
func (v *validator) fakeRuntime(src *Source, rt *Runtime) {
	if f := rt.Fake; f != nil && f.FailVersions != "" {
		if _, err := regexp.Compile(f.FailVersions); err != nil {
			v.add(src, "runtime.fake.failVersions", "invalid regular expression: %v", err)
		}
	}
}

// customRuntime checks a custom section.
func (v *validator) customRuntime(src *Source, rt *Runtime) {
	if c := rt.Custom; c != nil {
		p := "runtime.custom"
		v.proxy(src, p+".proxyRuntime", c.ProxyRuntime)
		if c.Apply == nil {
			v.add(src, p+".apply", "apply is required")
		} else {
			v.task(src, p+".apply", c.Apply.TaskConfig, c.Apply.KubernetesConfig, true)
			v.env(src, p+".apply.env", c.Apply.Env)
			if c.Apply.MaxConcurrency < 0 {
				v.add(src, p+".apply.maxConcurrency", "must not be negative")
			}
		}
		if c.Fetch != nil {
			v.task(src, p+".fetch", c.Fetch.TaskConfig, c.Fetch.KubernetesConfig, true)
			v.env(src, p+".fetch.env", c.Fetch.Env)
		}
		if c.GetInfo != nil {
			v.task(src, p+".getInfo", c.GetInfo.TaskConfig, c.GetInfo.KubernetesConfig, true)
			v.env(src, p+".getInfo.env", c.GetInfo.Env)
		}
		v.parameters(src, p+".parameters", c.Parameters)
		v.template(src, p+".applyId", c.ApplyID)
	}
}

// terraformRuntime checks a terraformRunner section.
func (v *validator) terraformRuntime(src *Source, rt *Runtime) {
	if t := rt.TerraformRunner; t != nil {
		v.proxy(src, "runtime.terraformRunner.proxyRuntime", t.ProxyRuntime)
		v.env(src, "runtime.terraformRunner.env", t.Env)
	}
}

// awsEcsRuntime checks an awsEcs section.
func (v *validator) awsEcsRuntime(src *Source, rt *Runtime) {
	if e := rt.AwsEcs; e != nil {
		p := "runtime.awsEcs"
		v.proxy(src, p+".proxyRuntime", e.ProxyRuntime)
		if e.Region == "" {
			v.add(src, p+".region", "region is required (like us-east-1)")
		} else if !awsRegionRE.MatchString(e.Region) {
			v.add(src, p+".region", "%q is not an AWS region (like us-east-1)", e.Region)
		}
		if e.EcsCluster == "" {
			v.add(src, p+".ecsCluster", "ecsCluster is required: the name or ARN of the cluster")
		}
		if k := e.AccessKey; k != nil {
			if e.InheritRoleFromRuntimeEnv != nil {
				v.add(src, p, "set only one of accessKey and inheritRoleFromRuntimeEnv")
			}
			if k.AwsAccessKeyID == "" {
				v.add(src, p+".accessKey.awsAccessKeyId", "awsAccessKeyId is required")
			}
			switch sk := k.AwsSecretAccessKey; {
			case sk.RawSecret != "" && sk.Secret != nil:
				v.add(src, p+".accessKey.awsSecretAccessKey", "set only one of rawSecret and secret")
			case sk.Secret != nil && (sk.Secret.Key == "" || sk.Secret.Version == ""):
				v.add(src, p+".accessKey.awsSecretAccessKey.secret", "key and version are required (drover secrets list shows them)")
			case sk.RawSecret == "" && sk.Secret == nil:
				v.add(src, p+".accessKey.awsSecretAccessKey", "secret (a stored secret: drover secrets set) or rawSecret is required")
			}
		}
	}
}
