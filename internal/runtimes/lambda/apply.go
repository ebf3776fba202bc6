package lambda

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/drover-dev/drover/internal/lambdaspec"
	"github.com/drover-dev/drover/internal/runtimes"
)

// settleTimeout bounds how long an apply waits for a function being
// created or updated to be ready for the next step.
const settleTimeout = 3 * time.Minute

// Apply brings the function's $LATEST to the target, publishes a version
// of it (or reuses one published with the same spec) and moves the alias
// to that version.
func (r *Runtime) Apply(ctx context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	o, want, err := parse(&t)
	if err != nil {
		return runtimes.ApplyResult{}, err
	}
	r.poller.Touch(t, seen{key: t.InstanceKey, obj: o, want: want})
	unlock := r.poller.LockApply(t.InstanceKey)
	defer unlock()
	res, err := r.apply(ctx, t, o, want)
	// The next Fetch reads the function again, what a read under way saw
	// is stale, and the poller reads it now.
	r.poller.Applied(t.InstanceKey)
	r.poller.Notify(t.InstanceKey)
	return res, err
}

func (r *Runtime) apply(ctx context.Context, t runtimes.Target, o lambdaspec.Object, want *lambda.CreateFunctionInput) (res runtimes.ApplyResult, err error) {
	name := o.FunctionName
	spec := o.Spec()
	var zip []byte
	if o.ZipBase64 != "" {
		if zip, err = base64.StdEncoding.DecodeString(o.ZipBase64); err != nil {
			return res, runtimes.Permanent(fmt.Errorf("%s: deployment package: %w", t.InstanceKey, err))
		}
	}
	fn, err := r.client.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
	switch {
	case notFound(err):
		fn = nil
	case err != nil:
		return res, permanent(fmt.Errorf("get Lambda function %s: %w", name, err))
	}
	var arn string
	if fn == nil {
		create := *want
		create.FunctionName = aws.String(name)
		create.Code = &types.FunctionCode{ZipFile: zip}
		if o.ImageURI != "" {
			create.Code = &types.FunctionCode{ImageUri: aws.String(o.ImageURI)}
			create.PackageType = types.PackageTypeImage
		}
		create.Tags = maps.Clone(want.Tags)
		if create.Tags == nil {
			create.Tags = map[string]string{}
		}
		create.Tags[TagInstance], create.Tags[TagSpec] = t.String(), spec
		out, err := r.client.CreateFunction(ctx, &create)
		if err != nil {
			return res, permanent(fmt.Errorf("create Lambda function %s: %w", name, err))
		}
		arn = aws.ToString(out.FunctionArn)
		res.Changes = append(res.Changes, runtimes.Change{Object: "Function " + name, Action: runtimes.ActionCreated})
	} else {
		if why := owner(t.InstanceKey, o, fn.Tags); why != "" {
			return res, runtimes.Permanent(fmt.Errorf("%s: not changed", why))
		}
		arn = aws.ToString(fn.Configuration.FunctionArn)
		action, err := r.update(ctx, t, o, want, zip, spec, fn)
		if err != nil {
			return res, err
		}
		res.Changes = append(res.Changes, runtimes.Change{Object: "Function " + name, Action: action})
	}
	latest, err := r.settle(ctx, name)
	if err != nil {
		return res, err
	}

	number, action, err := r.publish(ctx, t, o, spec, latest)
	if err != nil {
		return res, err
	}
	res.Changes = append(res.Changes, runtimes.Change{Object: "Version " + name + ":" + number, Action: action})

	action, err = r.moveAlias(ctx, o, number)
	if err != nil {
		return res, err
	}
	res.Changes = append(res.Changes, runtimes.Change{Object: "Alias " + name + ":" + o.Alias, Action: action})

	// The function records what drover deployed to the alias.
	tags := map[string]string{TagInstance: t.String(), TagVersion: t.Version, TagFunctionVersion: number, TagSpec: spec}
	if fn == nil || !sameTags(fn.Tags, tags) {
		if _, err := r.client.TagResource(ctx, &lambda.TagResourceInput{Resource: aws.String(unqualified(arn)), Tags: tags}); err != nil {
			return res, permanent(fmt.Errorf("tag Lambda function %s with what drover deployed: %w", name, err))
		}
	}
	return res, nil
}

// update brings an existing function's $LATEST to the target's code and
// configuration, sending only what differs.
func (r *Runtime) update(ctx context.Context, t runtimes.Target, o lambdaspec.Object, want *lambda.CreateFunctionInput, zip []byte, spec string, fn *lambda.GetFunctionOutput) (runtimes.Action, error) {
	name := o.FunctionName
	have := fn.Configuration
	action := runtimes.ActionUnchanged
	codeDiffers := o.CodeSha256 != "" && aws.ToString(have.CodeSha256) != o.CodeSha256 ||
		o.ImageURI != "" && (fn.Code == nil || aws.ToString(fn.Code.ImageUri) != o.ImageURI)
	if codeDiffers {
		if _, err := r.settle(ctx, name); err != nil {
			return action, err
		}
		up := &lambda.UpdateFunctionCodeInput{FunctionName: aws.String(name), Architectures: want.Architectures}
		if o.ImageURI != "" {
			up.ImageUri = aws.String(o.ImageURI)
		} else {
			up.ZipFile = zip
		}
		if _, err := r.client.UpdateFunctionCode(ctx, up); err != nil {
			return action, permanent(fmt.Errorf("update the code of Lambda function %s: %w", name, err))
		}
		action = runtimes.ActionConfigured
	}
	// The settings drover compares are those Lambda reports back; the
	// spec tag covers the others (what drover last set).
	if len(configDiff(want, have)) > 0 || fn.Tags[TagSpec] != spec {
		if _, err := r.settle(ctx, name); err != nil {
			return action, err
		}
		if _, err := r.client.UpdateFunctionConfiguration(ctx, configUpdate(name, want)); err != nil {
			return action, permanent(fmt.Errorf("update the configuration of Lambda function %s: %w", name, err))
		}
		action = runtimes.ActionConfigured
	}
	if fn.Tags[TagInstance] != t.String() {
		action = runtimes.ActionConfigured // adopted
	}
	return action, nil
}

// configUpdate is the UpdateFunctionConfiguration of what want sets.
func configUpdate(name string, want *lambda.CreateFunctionInput) *lambda.UpdateFunctionConfigurationInput {
	return &lambda.UpdateFunctionConfigurationInput{
		FunctionName: aws.String(name), Role: want.Role, Handler: want.Handler, Runtime: want.Runtime, Description: want.Description,
		MemorySize: want.MemorySize, Timeout: want.Timeout, Environment: want.Environment, Layers: want.Layers,
		TracingConfig: want.TracingConfig, EphemeralStorage: want.EphemeralStorage, VpcConfig: want.VpcConfig,
		DeadLetterConfig: want.DeadLetterConfig, KMSKeyArn: want.KMSKeyArn, ImageConfig: want.ImageConfig,
		FileSystemConfigs: want.FileSystemConfigs, SnapStart: want.SnapStart, LoggingConfig: want.LoggingConfig,
	}
}

// settle waits until the function is ready for an update or a publish
// (not Pending, no update in progress) and returns its $LATEST; a
// function Lambda failed to create or update is refused with its reason.
func (r *Runtime) settle(ctx context.Context, name string) (*lambda.GetFunctionConfigurationOutput, error) {
	deadline := r.now().Add(settleTimeout)
	for {
		cfg, err := r.client.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(name)})
		if err != nil {
			return nil, permanent(fmt.Errorf("get Lambda function %s: %w", name, err))
		}
		switch {
		case cfg.State == types.StateFailed:
			return nil, runtimes.Permanent(fmt.Errorf("the Lambda function %s is in state Failed: %s", name, aws.ToString(cfg.StateReason)))
		case cfg.LastUpdateStatus == types.LastUpdateStatusFailed:
			return nil, runtimes.Permanent(fmt.Errorf("the last update of Lambda function %s failed: %s", name, aws.ToString(cfg.LastUpdateStatusReason)))
		case cfg.State != types.StatePending && cfg.LastUpdateStatus != types.LastUpdateStatusInProgress:
			return cfg, nil
		}
		if r.now().After(deadline) {
			return nil, fmt.Errorf("the Lambda function %s is still %s after %s (%s); retrying", name, progress(cfg), settleTimeout, aws.ToString(cfg.StateReason))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(r.wait):
		}
	}
}

func progress(cfg *lambda.GetFunctionConfigurationOutput) string {
	if cfg.State == types.StatePending {
		return "pending"
	}
	return "updating"
}

// publish returns the version to move the alias to: one published for
// this spec with $LATEST's code (a rollback or a reapply publishes
// nothing), else a new one.
func (r *Runtime) publish(ctx context.Context, t runtimes.Target, o lambdaspec.Object, spec string, latest *lambda.GetFunctionConfigurationOutput) (string, runtimes.Action, error) {
	name := o.FunctionName
	best := 0
	p := lambda.NewListVersionsByFunctionPaginator(r.client, &lambda.ListVersionsByFunctionInput{FunctionName: aws.String(name)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", "", permanent(fmt.Errorf("list the versions of Lambda function %s: %w", name, err))
		}
		for _, v := range page.Versions {
			n, err := strconv.Atoi(aws.ToString(v.Version))
			if err != nil { // $LATEST
				continue
			}
			if _, s := parseDescription(aws.ToString(v.Description)); s == spec && aws.ToString(v.CodeSha256) == aws.ToString(latest.CodeSha256) &&
				v.State != types.StateFailed && n > best {
				best = n
			}
		}
	}
	if best > 0 {
		return strconv.Itoa(best), runtimes.ActionUnchanged, nil
	}
	out, err := r.client.PublishVersion(ctx, &lambda.PublishVersionInput{FunctionName: aws.String(name), CodeSha256: latest.CodeSha256,
		Description: aws.String(description(t.Version, spec))})
	if err != nil {
		return "", "", permanent(fmt.Errorf("publish a version of Lambda function %s: %w", name, err))
	}
	// Lambda answers with the latest version when $LATEST did not change
	// since it was published: that one runs the same code and settings.
	return aws.ToString(out.Version), runtimes.ActionCreated, nil
}

// moveAlias points the alias at number, weighted with the version it
// served before when the target asks for a canary.
func (r *Runtime) moveAlias(ctx context.Context, o lambdaspec.Object, number string) (runtimes.Action, error) {
	name := o.FunctionName
	cur, err := r.client.GetAlias(ctx, &lambda.GetAliasInput{FunctionName: aws.String(name), Name: aws.String(o.Alias)})
	if notFound(err) {
		if _, err := r.client.CreateAlias(ctx, &lambda.CreateAliasInput{FunctionName: aws.String(name), Name: aws.String(o.Alias), FunctionVersion: aws.String(number),
			Description: aws.String("drover's alias: it serves the version drover released")}); err != nil {
			return "", permanent(fmt.Errorf("create alias %s of Lambda function %s: %w", o.Alias, name, err))
		}
		return runtimes.ActionCreated, nil
	}
	if err != nil {
		return "", permanent(fmt.Errorf("get alias %s of Lambda function %s: %w", o.Alias, name, err))
	}
	weights := map[string]float64{}
	if w := o.PreviousVersionWeight; w > 0 {
		previous := aws.ToString(cur.FunctionVersion)
		if previous == number && cur.RoutingConfig != nil {
			// Moved already: keep the version it weighted.
			previous = ""
			for k := range cur.RoutingConfig.AdditionalVersionWeights {
				previous = k
			}
		}
		if previous != "" && previous != number {
			weights[previous] = w
		}
	}
	var have map[string]float64
	if cur.RoutingConfig != nil {
		have = cur.RoutingConfig.AdditionalVersionWeights
	}
	if aws.ToString(cur.FunctionVersion) == number && maps.Equal(have, weights) {
		return runtimes.ActionUnchanged, nil
	}
	if _, err := r.client.UpdateAlias(ctx, &lambda.UpdateAliasInput{FunctionName: aws.String(name), Name: aws.String(o.Alias), FunctionVersion: aws.String(number),
		RoutingConfig: &types.AliasRoutingConfiguration{AdditionalVersionWeights: weights}}); err != nil {
		return "", permanent(fmt.Errorf("move alias %s of Lambda function %s to version %s: %w", o.Alias, name, number, err))
	}
	return runtimes.ActionConfigured, nil
}

func sameTags(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// unqualified is a function ARN without a version or alias qualifier.
func unqualified(arn string) string {
	// arn:aws:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER]
	n := 0
	for i := range len(arn) {
		if arn[i] == ':' {
			n++
			if n == 7 {
				return arn[:i]
			}
		}
	}
	return arn
}
