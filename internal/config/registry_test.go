package config

import (
	"regexp"
	"strings"
	"testing"
)

func TestRegistryHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		info ImageRegistryInfo
		want string
	}{
		{ImageRegistryInfo{}, "docker.io"},
		{ImageRegistryInfo{ContainerRegistry: "dockerhub-public"}, "docker.io"},
		{ImageRegistryInfo{ContainerRegistry: "DockerHub"}, "docker.io"},
		{ImageRegistryInfo{ContainerRegistry: "index.docker.io"}, "docker.io"},
		{ImageRegistryInfo{ContainerRegistry: "ghcr.io"}, "ghcr.io"},
		{ImageRegistryInfo{ContainerRegistry: "registry.example.com:5000"}, "registry.example.com:5000"},
		{ImageRegistryInfo{ContainerRegistry: "localhost"}, "localhost"},
		{ImageRegistryInfo{ContainerRegistry: "registry:5000"}, "registry:5000"},
		{ImageRegistryInfo{ContainerRegistryID: "ghcr.io"}, "ghcr.io"},
		{ImageRegistryInfo{ContainerRegistry: "ghcr.io", ContainerRegistryID: "dockerhub"}, "ghcr.io"},
	}
	for _, tt := range tests {
		got, err := RegistryHost(&tt.info)
		if err != nil || got != tt.want {
			t.Errorf("RegistryHost(%+v) = %q, %v; want %q", tt.info, got, err, tt.want)
		}
	}
	for _, reg := range []string{"my-registry", "ecr", "localhost5000"} {
		_, err := RegistryHost(&ImageRegistryInfo{ContainerRegistry: reg})
		if err == nil || !strings.Contains(err.Error(), `container registry "`+reg+`" is neither a registry host`) {
			t.Errorf("RegistryHost(%q) error = %v", reg, err)
		}
	}
}

func TestImageRepository(t *testing.T) {
	t.Parallel()
	tests := []struct {
		info ImageRegistryInfo
		want string
	}{
		{ImageRegistryInfo{ContainerRegistry: "dockerhub-public", ImageRepository: "library/nginx"}, "docker.io/library/nginx"},
		{ImageRegistryInfo{ContainerRegistry: "ghcr.io", ImageRepository: "/acme/web"}, "ghcr.io/acme/web"},
		{ImageRegistryInfo{ImageRepository: "acme/web"}, "docker.io/acme/web"},
	}
	for _, tt := range tests {
		got, err := ImageRepository(&tt.info)
		if err != nil || got != tt.want {
			t.Errorf("ImageRepository(%+v) = %q, %v; want %q", tt.info, got, err, tt.want)
		}
	}
	if _, err := ImageRepository(&ImageRegistryInfo{ContainerRegistry: "corp", ImageRepository: "x"}); err == nil {
		t.Error("ImageRepository accepted a registry that is not a host")
	}
}

func TestValidDockerTag(t *testing.T) {
	t.Parallel()
	for tag, want := range map[string]bool{
		"latest": true, "v1.2.3": true, "1.0_rc-1": true, "_x": true,
		"sha256:" + strings.Repeat("a", 64): true,
		"":                                  false, "-bad": false, ".bad": false, "a b": false, "x/y": false,
		strings.Repeat("a", 128):            true,
		strings.Repeat("a", 129):            false,
		"sha256:" + strings.Repeat("A", 64): false,
	} {
		if got := ValidDockerTag(tag); got != want {
			t.Errorf("ValidDockerTag(%q) = %v, want %v", tag, got, want)
		}
	}
}

// dockerTagPattern is the definition ValidDockerTag implements, as the
// regular expression it replaced.
var dockerTagPattern = regexp.MustCompile(`^([A-Za-z0-9_][0-9A-Za-z_.-]{0,127}|sha256:[0-9a-f]{64})$`)

// FuzzDockerTag: ValidDockerTag accepts exactly what the pattern does.
func FuzzDockerTag(f *testing.F) {
	for _, seed := range []string{"latest", "v1.2.3", "_x", "-bad", "a b", "é", "sha256:" + strings.Repeat("a", 64),
		"sha256:" + strings.Repeat("a", 63), "sha256:" + strings.Repeat("a", 65), "sha256:" + strings.Repeat("A", 64),
		"sha256", "sha256:", strings.Repeat("a", 128), strings.Repeat("a", 129), "a\n", "a.b-c_D9"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tag string) {
		if got, want := ValidDockerTag(tag), dockerTagPattern.MatchString(tag); got != want {
			t.Fatalf("ValidDockerTag(%q) = %v, the pattern says %v", tag, got, want)
		}
	})
}
