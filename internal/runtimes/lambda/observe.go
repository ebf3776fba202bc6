package lambda

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/drover-dev/drover/internal/runtimes"
)

// View is the Lambda object: what drover read of one instance's function,
// shown as its runtime info (JSON) and judged by observe.
type View struct {
	Function string `json:"function"`
	Alias    string `json:"alias"`
	// AliasVersion is the published version the alias points at, and
	// RoutingConfig the versions it also sends a share of invocations to.
	AliasVersion  string             `json:"aliasVersion"`
	RoutingConfig map[string]float64 `json:"routingConfig,omitempty"`
	// Version is the published version the alias points at, with the
	// drover version its description names.
	Version       published `json:"version"`
	DroverVersion string    `json:"droverVersion,omitempty"`
	// Deployed is what drover last moved the alias to (the function's
	// drover:version and drover:function-version tags).
	Deployed struct {
		Version         string `json:"version,omitempty"`
		FunctionVersion string `json:"functionVersion,omitempty"`
	} `json:"deployed"`
	// Latest is the function's $LATEST, the code and configuration the
	// next published version would have.
	Latest struct {
		CodeSha256             string `json:"codeSha256,omitempty"`
		ImageURI               string `json:"imageUri,omitempty"`
		State                  string `json:"state,omitempty"`
		LastUpdateStatus       string `json:"lastUpdateStatus,omitempty"`
		LastUpdateStatusReason string `json:"lastUpdateStatusReason,omitempty"`
		LastModified           string `json:"lastModified,omitempty"`
	} `json:"latest"`
	// Drift lists what differs from what drover deployed, in words.
	Drift []string `json:"drift,omitempty"`
}

// viewOf builds the Lambda object from what the API returned.
func viewOf(sn seen, fn *lambda.GetFunctionOutput, alias *lambda.GetAliasOutput, ver *published) View {
	v := View{Function: sn.obj.FunctionName, Alias: sn.obj.Alias, AliasVersion: aws.ToString(alias.FunctionVersion), Version: *ver}
	if rc := alias.RoutingConfig; rc != nil && len(rc.AdditionalVersionWeights) > 0 {
		v.RoutingConfig = rc.AdditionalVersionWeights
	}
	v.DroverVersion, _ = parseDescription(ver.Description)
	v.Deployed.Version, v.Deployed.FunctionVersion = fn.Tags[TagVersion], fn.Tags[TagFunctionVersion]
	if c := fn.Configuration; c != nil {
		v.Latest.CodeSha256, v.Latest.State, v.Latest.LastUpdateStatus = aws.ToString(c.CodeSha256), string(c.State), string(c.LastUpdateStatus)
		v.Latest.LastUpdateStatusReason, v.Latest.LastModified = aws.ToString(c.LastUpdateStatusReason), aws.ToString(c.LastModified)
	}
	if fn.Code != nil {
		v.Latest.ImageURI = aws.ToString(fn.Code.ImageUri)
	}
	if fn.Configuration != nil && sn.want != nil {
		v.Drift = latestDrift(sn, fn.Configuration, v.Latest.ImageURI)
	}
	if d := routingDrift(sn, v); d != "" {
		v.Drift = append(v.Drift, d)
	}
	return v
}

// observe turns the Lambda object into the instance's state.
func observe(sn seen, v View) runtimes.State {
	obj := runtimes.Object{ObjectType: "Lambda", Name: sn.obj.FunctionName + ":" + sn.obj.Alias, Status: runtimes.ObjectPending, Replicas: 1, TargetReplicas: 1}
	st := runtimes.State{}
	switch {
	case v.Deployed.FunctionVersion != "" && v.AliasVersion == v.Deployed.FunctionVersion:
		st.Version = v.Deployed.Version
	case v.DroverVersion != "":
		// Moved to a version drover published, by hand or by an apply cut
		// short before it tagged the function.
		st.Version = v.DroverVersion
	default:
		st.Message = fmt.Sprintf("alias %s points at version %s, which drover did not publish", sn.obj.Alias, v.AliasVersion)
	}
	obj.Version = st.Version
	serving := fmt.Sprintf("alias %s on version %s", sn.obj.Alias, v.AliasVersion)
	if len(v.RoutingConfig) > 0 {
		var parts []string
		rest := 1.0
		for _, k := range sortedKeys(v.RoutingConfig) {
			parts = append(parts, fmt.Sprintf("%.0f%% to version %s", v.RoutingConfig[k]*100, k))
			rest -= v.RoutingConfig[k]
		}
		serving = fmt.Sprintf("alias %s: %.0f%% to version %s, %s", sn.obj.Alias, rest*100, v.AliasVersion, strings.Join(parts, ", "))
	}
	switch {
	case st.Version == "":
		// Not ours to judge: the engine applies the target.
	case v.Version.State == string(types.StateFailed):
		st.Failed = true
		obj.Status = runtimes.ObjectFailed
		st.Message = fmt.Sprintf("%s failed: version %s of function %s is in state Failed: %s", st.Version, v.AliasVersion, sn.obj.FunctionName, v.Version.StateReason)
	case v.Version.State == string(types.StatePending):
		st.Message = fmt.Sprintf("%s starting: version %s of function %s is pending (%s)", st.Version, v.AliasVersion, sn.obj.FunctionName, v.Version.StateReason)
	case v.Version.State == string(types.StateInactive):
		// Lambda deactivates idle versions; the next invocation wakes it.
		st.Converged = true
		st.Message = fmt.Sprintf("%s serving (%s, inactive until invoked)", st.Version, serving)
	default:
		st.Converged = true
		st.Message = fmt.Sprintf("%s serving (%s)", st.Version, serving)
	}
	if st.Converged {
		obj.Status, obj.AvailableReplicas = runtimes.ObjectSucceeded, 1
	}
	if st.Version != "" && len(v.Drift) > 0 {
		st.Drifted, st.Converged = true, false
		obj.Status, obj.AvailableReplicas = runtimes.ObjectPending, 0
		st.Message = fmt.Sprintf("changed outside drover: %s", strings.Join(v.Drift, "; "))
	}
	obj.Message = st.Message
	st.Objects = []runtimes.Object{obj}
	return st
}

// latestDrift lists how the function's $LATEST differs from the target:
// its code, and the settings the target's configuration sets among those
// Lambda reports back.
func latestDrift(sn seen, have *types.FunctionConfiguration, imageURI string) []string {
	var out []string
	switch {
	case sn.obj.CodeSha256 != "" && aws.ToString(have.CodeSha256) != sn.obj.CodeSha256:
		out = append(out, fmt.Sprintf("$LATEST's code is %s, not %s", aws.ToString(have.CodeSha256), sn.obj.CodeSha256))
	case sn.obj.ImageURI != "" && imageURI != "" && imageURI != sn.obj.ImageURI:
		out = append(out, fmt.Sprintf("$LATEST's image is %s, not %s", imageURI, sn.obj.ImageURI))
	}
	if diff := configDiff(sn.want, have); len(diff) > 0 {
		out = append(out, "$LATEST's "+strings.Join(diff, ", ")+" changed")
	}
	return out
}

// routingDrift says how the alias's weights differ from the target's
// (weights set by hand, or taken off), "" when they do not.
func routingDrift(sn seen, v View) string {
	w := sn.obj.PreviousVersionWeight
	switch {
	case w == 0 && len(v.RoutingConfig) > 0:
		return fmt.Sprintf("alias %s sends a share of invocations to version %s", sn.obj.Alias, strings.Join(sortedKeys(v.RoutingConfig), ", "))
	case w > 0 && len(v.RoutingConfig) > 1:
		return fmt.Sprintf("alias %s is weighted over versions %s", sn.obj.Alias, strings.Join(sortedKeys(v.RoutingConfig), ", "))
	case w > 0 && len(v.RoutingConfig) == 1:
		for _, got := range v.RoutingConfig {
			if fmt.Sprintf("%.4f", got) != fmt.Sprintf("%.4f", w) {
				return fmt.Sprintf("alias %s keeps %.0f%% on its previous version, not %.0f%%", sn.obj.Alias, got*100, w*100)
			}
		}
	}
	return ""
}

// configDiff names the settings want sets that have differs in (those
// Lambda reports back in a function's configuration).
func configDiff(want *lambda.CreateFunctionInput, have *types.FunctionConfiguration) []string {
	var out []string
	str := func(name string, w, h *string) {
		if w != nil && aws.ToString(w) != aws.ToString(h) {
			out = append(out, name)
		}
	}
	num := func(name string, w, h *int32) {
		if w != nil && aws.ToInt32(w) != aws.ToInt32(h) {
			out = append(out, name)
		}
	}
	str("Role", want.Role, have.Role)
	str("Handler", want.Handler, have.Handler)
	if want.Runtime != "" && want.Runtime != have.Runtime {
		out = append(out, "Runtime")
	}
	str("Description", want.Description, have.Description)
	num("MemorySize", want.MemorySize, have.MemorySize)
	num("Timeout", want.Timeout, have.Timeout)
	var wantEnv, haveEnv map[string]string
	if want.Environment != nil {
		wantEnv = want.Environment.Variables
	}
	if have.Environment != nil {
		haveEnv = have.Environment.Variables
	}
	if (want.Environment != nil || len(haveEnv) > 0) && !maps.Equal(wantEnv, haveEnv) {
		out = append(out, "Environment")
	}
	if want.Layers != nil {
		var got []string
		for _, l := range have.Layers {
			got = append(got, aws.ToString(l.Arn))
		}
		if !slices.Equal(want.Layers, got) {
			out = append(out, "Layers")
		}
	}
	return out
}
