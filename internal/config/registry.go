package config

import (
	"fmt"
	"strings"
)

// dockerHubNames are the registry names that mean Docker Hub. Prodvana names
// registries by integration ("dockerhub-public"); in drover a registry is one
// of these names, a host, or the name of a containerRegistry config (which
// the compiler resolves before RegistryHost is asked).
var dockerHubNames = map[string]bool{
	"dockerhub": true, "dockerhub-public": true, "docker-hub": true, "docker.io": true, "index.docker.io": true,
}

// RegistryHost returns the registry host for imageRegistryInfo: Docker Hub for
// its well-known names and for an empty registry, otherwise the registry itself,
// which must look like a host (contain a dot or a port, or be localhost).
func RegistryHost(info *ImageRegistryInfo) (string, error) {
	reg := info.ContainerRegistry
	if reg == "" {
		reg = info.ContainerRegistryID
	}
	switch {
	case reg == "" || dockerHubNames[strings.ToLower(reg)]:
		return "docker.io", nil
	case strings.ContainsAny(reg, ".:") || reg == "localhost":
		return reg, nil
	}
	return "", fmt.Errorf("container registry %q is neither a registry host (e.g. ghcr.io, registry.example.com:5000), dockerhub-public, nor a containerRegistry config", reg)
}

// ImageRepository returns the repository with its registry, e.g. docker.io/library/nginx.
func ImageRepository(info *ImageRegistryInfo) (string, error) {
	host, err := RegistryHost(info)
	if err != nil {
		return "", err
	}
	return host + "/" + strings.TrimPrefix(info.ImageRepository, "/"), nil
}
