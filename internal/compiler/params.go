package compiler

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/customspec"
)

// ParamValue is one parameter value given at push time (`--param NAME=VALUE`),
// optionally for a single release channel.
type ParamValue struct {
	Name           string `json:"name"`
	Value          string `json:"value"`
	ReleaseChannel string `json:"releaseChannel,omitempty"`
}

// ParseParam parses NAME=VALUE.
func ParseParam(s string) (ParamValue, error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return ParamValue{}, fmt.Errorf("invalid parameter %q: want NAME=VALUE", config.Clip(s))
	}
	return ParamValue{Name: name, Value: value}, nil
}

// ParseReleaseChannelParam parses RC=NAME=VALUE (pvnctl's --param-by-release-channel).
func ParseReleaseChannelParam(s string) (ParamValue, error) {
	rc, rest, ok := strings.Cut(s, "=")
	if !ok || rc == "" {
		return ParamValue{}, fmt.Errorf("invalid parameter %q: want RELEASE_CHANNEL=NAME=VALUE", config.Clip(s))
	}
	p, err := ParseParam(rest)
	if err != nil {
		return ParamValue{}, fmt.Errorf("invalid parameter %q: want RELEASE_CHANNEL=NAME=VALUE", config.Clip(s))
	}
	p.ReleaseChannel = rc
	return p, nil
}

// DockerImage is a dockerImage parameter's value. In templates,
// {{.Params.image}} prints the full reference and {{.Params.image.Tag}} the tag.
type DockerImage struct {
	Registry   string `json:"registry"`
	Repository string `json:"repository"`
	// Tag is the tag, or the digest ("sha256:...") when pinned by digest.
	Tag string `json:"tag"`
}

// String returns the full reference: registry/repository:tag or @sha256:...
func (d DockerImage) String() string {
	sep := ":"
	if strings.HasPrefix(d.Tag, "sha256:") {
		sep = "@"
	}
	return d.Registry + "/" + d.Repository + sep + d.Tag
}

// MarshalText makes JSON output show the full reference.
func (d DockerImage) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Secret is a secret parameter's value. It prints as a reference, never the
// secret: through String, MarshalText, every fmt verb (Format, GoString) and
// therefore every template function (printf, print, html, js, ...). The raw
// value sits in an unexported field that templates cannot reach.
type Secret struct {
	Key     string `json:"key,omitempty"`
	Version string `json:"version,omitempty"`
	raw     string
	// param is set on the raw secret parameters of a custom runtime: the
	// secret then prints as SecretMarker(param), which the runtime replaces
	// with the value when it runs a command (see CustomRuntimeObject.Secrets).
	param string
	// sentinel, when set, is what the secret prints as during a render of
	// the custom runtime's commands (see template_secrets.go).
	sentinel string
}

// String never reveals a raw secret.
func (s Secret) String() string {
	switch {
	case s.sentinel != "":
		return s.sentinel
	case s.Key != "":
		return "secret://" + s.Key + "@" + s.Version
	case s.param != "":
		return SecretMarker(s.param)
	}
	return "(secret)"
}

// GoString keeps %#v from printing the fields.
func (s Secret) GoString() string { return s.String() }

// Format prints String for every verb and flag combination (%v, %+v, %#v,
// %s, %q, %x, widths...), as if the secret were that string.
func (s Secret) Format(f fmt.State, verb rune) {
	format := fmt.FormatString(f, verb)
	if verb == 'v' && f.Flag('#') {
		format = "%q"
	}
	fmt.Fprintf(f, format, s.String())
}

// MarshalText redacts the secret.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// SecretMarker is how a raw secret parameter of a custom runtime renders in
// its commands; the runtime puts the value in its place when it runs them.
func SecretMarker(param string) string { return customspec.SecretMarker(param) }

var commitRE = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// parseValue converts a command-line value to the parameter's type.
func parseValue(def *config.ParameterDefinition, raw string) (any, error) {
	switch {
	case def.String != nil:
		return raw, nil
	case def.Int != nil:
		i, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parameter %q is an int: %q is not an integer", def.Name, config.Clip(raw))
		}
		return i, nil
	case def.DockerImage != nil:
		return dockerImage(def, raw)
	case def.Commit != nil:
		c := strings.ToLower(strings.TrimSpace(raw))
		if !commitRE.MatchString(c) {
			return nil, fmt.Errorf("parameter %q is a commit: %q is not a commit SHA", def.Name, config.Clip(raw))
		}
		return c, nil
	case def.Blob != nil:
		return blobID(raw), nil
	case def.Secret != nil:
		return nil, fmt.Errorf("parameter %q is a secret: secrets cannot be passed as plain --param values", def.Name)
	}
	return nil, fmt.Errorf("parameter %q has no type", def.Name)
}

func blobID(content string) string {
	sum := sha256.Sum256([]byte(content))
	return "blob-" + hex.EncodeToString(sum[:8])
}

// dockerImage accepts a tag ("1.25"), a digest ("sha256:..."), or a full image
// reference, of which only the tag or digest is kept, as pvnctl does.
func dockerImage(def *config.ParameterDefinition, raw string) (DockerImage, error) {
	info := def.DockerImage.ImageRegistryInfo
	if info == nil {
		return DockerImage{}, fmt.Errorf("parameter %q: imageRegistryInfo is required", def.Name)
	}
	host, err := config.RegistryHost(info)
	if err != nil {
		return DockerImage{}, fmt.Errorf("parameter %q: %w", def.Name, err)
	}
	tag := strings.TrimSpace(raw)
	if !config.ValidDockerTag(tag) {
		// A full reference: keep what follows @ or the last : after the last /.
		if i := strings.LastIndex(tag, "@"); i >= 0 {
			tag = tag[i+1:]
		} else if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
			tag = tag[i+1:]
		} else {
			return DockerImage{}, fmt.Errorf("parameter %q is a docker image: %q has no tag or digest", def.Name, config.Clip(raw))
		}
	}
	if !config.ValidDockerTag(tag) {
		return DockerImage{}, fmt.Errorf("parameter %q is a docker image: %q is not a valid tag or sha256 digest", def.Name, config.Clip(tag))
	}
	return DockerImage{Registry: host, Repository: strings.TrimPrefix(info.ImageRepository, "/"), Tag: tag}, nil
}

// valueFromConfig converts a ParameterValue written in a config (custom runtime
// values, protection and extension refs) to the definition's type.
func valueFromConfig(def *config.ParameterDefinition, pv config.ParameterValue) (any, error) {
	switch {
	case pv.String != nil:
		if def.String == nil {
			return parseValue(def, *pv.String)
		}
		return *pv.String, nil
	case pv.Int != nil:
		if def.Int == nil {
			return nil, fmt.Errorf("parameter %q is not an int", def.Name)
		}
		return int64(*pv.Int), nil
	case pv.DockerImageTag != nil:
		if def.DockerImage == nil {
			return nil, fmt.Errorf("parameter %q is not a dockerImage", def.Name)
		}
		return dockerImage(def, *pv.DockerImageTag)
	case pv.Commit != nil:
		if def.Commit == nil {
			return nil, fmt.Errorf("parameter %q is not a commit", def.Name)
		}
		return parseValue(def, *pv.Commit)
	case pv.Blob != nil:
		if def.Blob == nil {
			return nil, fmt.Errorf("parameter %q is not a blob", def.Name)
		}
		content := pv.Blob.Inlined
		if pv.Blob.InlinedBytes != "" {
			b, err := base64.StdEncoding.DecodeString(pv.Blob.InlinedBytes)
			if err != nil {
				return nil, fmt.Errorf("parameter %q: inlinedBytes is not base64: %w", def.Name, err)
			}
			content = string(b)
		}
		return blobID(content), nil
	case pv.Secret != nil:
		if def.Secret == nil {
			return nil, fmt.Errorf("parameter %q is not a secret", def.Name)
		}
		if pv.Secret.SecretRef != nil {
			return Secret{Key: pv.Secret.SecretRef.Key, Version: pv.Secret.SecretRef.Version}, nil
		}
		return Secret{raw: pv.Secret.RawSecret}, nil
	}
	return nil, fmt.Errorf("parameter %q: no value", def.Name)
}

// defaultValue returns the definition's default, or nil when it has none
// (an empty default counts as none).
func defaultValue(def *config.ParameterDefinition) (any, error) {
	switch {
	case def.String != nil:
		if def.String.DefaultValue == "" {
			return nil, nil
		}
		return def.String.DefaultValue, nil
	case def.Int != nil:
		if def.Int.DefaultValue == nil {
			return nil, nil
		}
		return int64(*def.Int.DefaultValue), nil
	case def.DockerImage != nil:
		if def.DockerImage.DefaultTag == "" {
			return nil, nil
		}
		return dockerImage(def, def.DockerImage.DefaultTag)
	case def.Blob != nil:
		if def.Blob.DefaultValue == "" {
			return nil, nil
		}
		return blobID(def.Blob.DefaultValue), nil
	}
	return nil, nil
}

// resolveParams returns the values of defs for one release channel: explicit
// per-channel values beat top-level ones, then defaults; a required parameter
// left without a value is an error, or, with placeholders, gets a stand-in of
// its type (standIns names those parameters, sorted). Unknown names are
// errors too.
func resolveParams(defs []config.ParameterDefinition, given []ParamValue, rc string, placeholders bool) (values map[string]any, standIns []string, err error) {
	byName := map[string]*config.ParameterDefinition{}
	for i := range defs {
		byName[defs[i].Name] = &defs[i]
	}
	explicit := map[string]string{}
	for _, pv := range given {
		if byName[pv.Name] == nil {
			return nil, nil, fmt.Errorf("unknown parameter %q%s", config.Clip(pv.Name), nameHint(defs))
		}
		if pv.ReleaseChannel == "" {
			if _, set := explicit[pv.Name]; !set {
				explicit[pv.Name] = pv.Value
			}
		}
	}
	for _, pv := range given {
		if pv.ReleaseChannel == rc {
			explicit[pv.Name] = pv.Value
		}
	}
	out := map[string]any{}
	var missing []string
	for i := range defs {
		def := &defs[i]
		if raw, ok := explicit[def.Name]; ok {
			v, err := parseValue(def, raw)
			if err != nil {
				return nil, nil, err
			}
			out[def.Name] = v
			continue
		}
		v, err := defaultValue(def)
		if err != nil {
			return nil, nil, err
		}
		if v == nil {
			switch {
			case def.Required && placeholders:
				v = placeholder(def)
				standIns = append(standIns, def.Name)
			case def.Required:
				missing = append(missing, def.Name)
				continue
			default:
				v = zeroValue(def)
			}
		}
		out[def.Name] = v
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		if len(missing) == 1 {
			return nil, nil, fmt.Errorf("required parameter %s has no value: pass --param %s=VALUE", missing[0], missing[0])
		}
		return nil, nil, fmt.Errorf("required parameters %s have no value: pass --param NAME=VALUE for each", strings.Join(missing, ", "))
	}
	sort.Strings(standIns)
	return out, standIns, nil
}

// standInNote is what a validation error says when the channel was rendered
// with stand-ins for required parameters: the error may be the templates,
// chart or tree refusing the stand-in, which says nothing about the config.
func standInNote(params map[string]any, names []string) string {
	if len(names) == 0 {
		return ""
	}
	shown := make([]string, len(names))
	for i, n := range names {
		shown[i] = fmt.Sprintf("%s=%v", n, params[n])
	}
	which, flags := "parameter "+names[0]+", which has", "--param "+names[0]+"=VALUE"
	if len(names) > 1 {
		which, flags = "parameters "+strings.Join(names, ", ")+", which have", "--param NAME=VALUE for each"
	}
	return fmt.Sprintf(" (rendered with a stand-in for required %s no value and no default: %s; "+
		"if the stand-in is what was refused, give a real value: drover validate %s)",
		which, strings.Join(shown, ", "), flags)
}

// placeholder is a value of the parameter's type used when validating configs.
func placeholder(def *config.ParameterDefinition) any {
	switch {
	case def.Int != nil:
		return int64(1)
	case def.DockerImage != nil:
		if img, err := dockerImage(def, "placeholder"); err == nil {
			return img
		}
	case def.Commit != nil:
		return "0000000"
	case def.Secret != nil:
		return Secret{Key: "placeholder"}
	}
	return "placeholder"
}

func zeroValue(def *config.ParameterDefinition) any {
	if def.Int != nil {
		return int64(0)
	}
	return ""
}

func nameHint(defs []config.ParameterDefinition) string {
	if len(defs) == 0 {
		return " (the service has no parameters)"
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	return " (parameters: " + strings.Join(names, ", ") + ")"
}

// resolveRegistries returns defs with each dockerImage's registry that names
// a containerRegistry config replaced by that registry's host, and its
// repository prefix put before the image repository. Hosts and Docker Hub's
// names are kept; any other name must be a configured registry. defs is not
// modified.
func resolveRegistries(defs []config.ParameterDefinition, registries map[string]*config.ContainerRegistry) ([]config.ParameterDefinition, error) {
	out, cloned := defs, false
	for i, def := range defs {
		if def.DockerImage == nil || def.DockerImage.ImageRegistryInfo == nil {
			continue
		}
		info := *def.DockerImage.ImageRegistryInfo
		name := info.ContainerRegistry
		if name == "" {
			name = info.ContainerRegistryID
		}
		reg, ok := registries[name]
		if !ok {
			if _, err := config.RegistryHost(&info); err != nil {
				return nil, fmt.Errorf("parameter %q: container registry %q is neither a registry host nor a containerRegistry config%s",
					def.Name, name, registryHint(registries))
			}
			continue
		}
		info.ContainerRegistry, info.ContainerRegistryID = reg.Host, ""
		if p := strings.Trim(reg.RepositoryPrefix, "/"); p != "" {
			info.ImageRepository = p + "/" + strings.TrimPrefix(info.ImageRepository, "/")
		}
		di := *def.DockerImage
		di.ImageRegistryInfo = &info
		if !cloned {
			out, cloned = slices.Clone(defs), true
		}
		out[i].DockerImage = &di
	}
	return out, nil
}

// registryHint lists the configured registries for an error message.
func registryHint(registries map[string]*config.ContainerRegistry) string {
	if len(registries) == 0 {
		return " (no containerRegistry is configured)"
	}
	return " (configured: " + strings.Join(slices.Sorted(maps.Keys(registries)), ", ") + ")"
}
