package compiler

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/lambdaspec"
)

// AWS Lambda is drover's own backend (docs/lambda.md).
func init() {
	registerBackend(serviceBackend{
		name: "awsLambda", accepted: config.BackendAwsLambda, compiled: lambdaspec.Kind,
		set: func(b *config.ServiceBackend) bool { return b.AwsLambda != nil },
		compile: func(c *rcCompiler, field string, m *serviceForRC, rt *config.Runtime, data *Data, out *CompiledReleaseChannel) {
			out.Backend = lambdaspec.Kind
			c.checkLambdaEnv(m)
			if obj := c.awsLambda(field+".awsLambda", m.Backend.AwsLambda, rt, data); obj != nil {
				out.Objects = []any{obj}
			}
		},
		inject: func(_ *Result, rc *CompiledReleaseChannel, meta map[string]string) error {
			for _, obj := range rc.Objects {
				if o, ok := obj.(*lambdaspec.Object); ok {
					if err := injectLambda(o, rc.Env, meta); err != nil {
						return err
					}
				}
			}
			return nil
		},
	})
}

// awsLambda renders a service's function configuration, code and alias
// for the channel and checks the configuration against the AWS SDK's
// CreateFunction input; errors name the file and line.
func (c *rcCompiler) awsLambda(field string, l *config.AwsLambdaConfig, rt *config.Runtime, data *Data) *lambdaspec.Object {
	obj := &lambdaspec.Object{Kind: lambdaspec.Kind, Runtime: rt.Name, Adopt: l.Adopt, Alias: lambdaspec.DefaultAlias}
	fail := func(f, msg string) { c.fail(Error{Object: c.serviceObject(), Field: f, Msg: msg}) }
	if l.Function == nil || l.Function.Inlined == "" {
		fail(field+".function", "a function is required: the CreateFunction JSON, inlined or local")
		return nil
	}
	if l.Code == nil || (l.Code.Zip == nil) == (l.Code.ImageURI == "") {
		fail(field+".code", "set one of code.zip (local.path of a deployment package) and code.imageUri")
		return nil
	}
	fnSpec := c.lambdaFunction(l)
	where, file := field+".function.inlined", fnSpec.File
	if file != "" {
		where = field + ".function.local"
	}
	docFail := func(line int, msg string) {
		e := Error{Object: c.serviceObject(), Field: where, Msg: msg}
		if file != "" {
			e.File, e.Line = file, line
		} else if line > 0 {
			e.Msg = fmt.Sprintf("line %d: %s", line, msg)
		}
		c.fail(e)
	}
	rendered, err := c.templates.render(c.ctx, where, fnSpec.Inlined, data)
	if err != nil {
		line, msg := templateError(err)
		docFail(line, msg+keysHint(msg, data))
		return nil
	}
	in, err := lambdaspec.Function([]byte(rendered))
	if err != nil {
		var de *lambdaspec.Error
		if errors.As(err, &de) {
			docFail(de.Line, "invalid Lambda function: "+de.Msg)
		} else {
			docFail(0, err.Error())
		}
		return nil
	}
	obj.FunctionName = c.in.Service.Name
	if in.FunctionName != nil {
		obj.FunctionName = *in.FunctionName
	}
	if !lambdaNameRE.MatchString(obj.FunctionName) {
		docFail(0, fmt.Sprintf("FunctionName %q is not a Lambda function name (1 to 64 letters, digits, - and _)", obj.FunctionName))
		return nil
	}
	canon, err := lambdaspec.Canonical([]byte(rendered))
	if err != nil {
		docFail(0, err.Error())
		return nil
	}
	obj.Function = canon
	switch {
	case l.Code.Zip != nil:
		zip, err := base64.StdEncoding.DecodeString(l.Code.Zip.Base64)
		if err != nil || len(zip) == 0 {
			fail(field+".code.zip", "the deployment package was not read: push it with drover (local.path)")
			return nil
		}
		obj.ZipBase64, obj.CodeSha256 = l.Code.Zip.Base64, lambdaspec.ZipSha256(zip)
		if in.PackageType == "Image" {
			docFail(lineIn(rendered, `"PackageType"`), "PackageType Image wants code.imageUri, not a zip")
			return nil
		}
	default:
		uri, ok := c.renderField(field+".code.imageUri", l.Code.ImageURI, data)
		if !ok {
			return nil
		}
		obj.ImageURI = strings.TrimSpace(uri)
		if obj.ImageURI == "" || strings.ContainsAny(obj.ImageURI, " \t\n") {
			fail(field+".code.imageUri", fmt.Sprintf("%q is not an image URI", obj.ImageURI))
			return nil
		}
		if in.PackageType != "" && in.PackageType != "Image" {
			docFail(lineIn(rendered, `"PackageType"`), "code.imageUri wants PackageType Image (or leave PackageType out)")
			return nil
		}
	}
	if l.Alias != "" {
		alias, ok := c.renderField(field+".alias", l.Alias, data)
		if !ok {
			return nil
		}
		obj.Alias = strings.TrimSpace(alias)
	}
	if !lambdaAliasRE.MatchString(obj.Alias) || len(obj.Alias) > 128 {
		fail(field+".alias", fmt.Sprintf("%q is not a Lambda alias name (letters, digits, - and _, not only digits)", obj.Alias))
		return nil
	}
	if rc := l.RoutingConfig; rc != nil {
		obj.PreviousVersionWeight = float64(rc.PreviousVersionPercent) / 100
	}
	return obj
}

// lambdaFunction is the function spec of the channel: the perReleaseChannel
// entry's when it sets one (an inlined one there replaces a file of the
// top level's, whose name must not stay), else the merged one.
func (c *rcCompiler) lambdaFunction(merged *config.AwsLambdaConfig) *config.LambdaFunctionSpec {
	for _, p := range c.in.Service.PerReleaseChannel {
		if p.ReleaseChannel == c.rc.Name && p.AwsLambda != nil && p.AwsLambda.Function != nil {
			return p.AwsLambda.Function
		}
	}
	return merged.Function
}

// lineIn is the line of the first occurrence of s in text (0 if none).
func lineIn(text, s string) int {
	i := strings.Index(text, s)
	if i < 0 {
		return 0
	}
	return strings.Count(text[:i], "\n") + 1
}

// injectLambda adds the plain env and the PVN_* variables to the
// function's Environment.Variables; a variable the function sets wins.
// Secret env was refused before (checkLambdaEnv).
func injectLambda(o *lambdaspec.Object, env map[string]config.EnvValue, meta map[string]string) error {
	plain := maps.Clone(meta)
	for k, v := range env {
		if !isMeta(meta, k) && v.RawSecret == "" && v.Secret == nil && v.KubernetesSecret == nil {
			plain[k] = v.Value
		}
	}
	if len(plain) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(o.Function))
	d.UseNumber()
	var fn map[string]any
	if err := d.Decode(&fn); err != nil {
		return fmt.Errorf("lambda function: %w", err)
	}
	envObj, _ := fn["Environment"].(map[string]any)
	if envObj == nil {
		envObj = map[string]any{}
	}
	vars, _ := envObj["Variables"].(map[string]any)
	if vars == nil {
		vars = map[string]any{}
	}
	for _, k := range slices.Sorted(maps.Keys(plain)) {
		if _, own := vars[k]; !own {
			vars[k] = plain[k]
		}
	}
	envObj["Variables"] = vars
	fn["Environment"] = envObj
	raw, err := json.Marshal(fn)
	if err != nil {
		return fmt.Errorf("lambda function: %w", err)
	}
	o.Function = raw
	return nil
}

// checkLambdaEnv refuses secret env on Lambda: a function's environment
// variables are readable by whoever may read its configuration, and
// drover does not keep them elsewhere for Lambda yet.
func (c *rcCompiler) checkLambdaEnv(merged *serviceForRC) {
	for _, k := range slices.Sorted(maps.Keys(merged.Env)) {
		v := merged.Env[k]
		if v.RawSecret != "" || v.Secret != nil || v.KubernetesSecret != nil {
			c.fail(Error{Object: c.serviceObject(), Field: "service.env." + k,
				Msg: "secret env is not supported on awsLambda yet (a function's environment is readable with its configuration): have the function read it from AWS Secrets Manager or SSM"})
		}
	}
	if c.rc.Policy == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(c.rc.Policy.DefaultEnv)) {
		v := c.rc.Policy.DefaultEnv[k]
		if _, own := merged.Env[k]; !own && (v.RawSecret != "" || v.Secret != nil || v.KubernetesSecret != nil) {
			c.fail(Error{Object: "application/" + c.in.Application.Name, Field: c.rc.Field + ".policy.defaultEnv." + k,
				Msg: fmt.Sprintf("secret env is not supported on awsLambda yet, and service %s runs on awsLambda: set %s in the service's env to a plain value to override it", c.in.Service.Name, k)})
		}
	}
}

// lambdaNameRE and lambdaAliasRE are what Lambda accepts as a function's
// and an alias's name.
var (
	lambdaNameRE  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	lambdaAliasRE = regexp.MustCompile(`^[A-Za-z0-9_-]*[A-Za-z_-][A-Za-z0-9_-]*$`)
)
