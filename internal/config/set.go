package config

import (
	"sort"
)

// Set is a collection of config sources indexed by kind and name, as read by
// one `drover validate` or `drover apply` invocation or as stored by the server.
type Set struct {
	Sources            []*Source
	Applications       map[string]*Source
	Services           map[ServiceKey]*Source
	Runtimes           map[string]*Source
	Protections        map[string]*Source
	DeliveryExtensions map[string]*Source
	Registries         map[string]*Source
	Webhooks           map[string]*Source
	// ReleaseChannels are standalone releaseChannel files, by application.
	ReleaseChannels map[string][]*Source
}

// ServiceKey names a service within its application.
type ServiceKey struct{ Application, Service string }

func (k ServiceKey) String() string { return k.Application + "/" + k.Service }

// NewSet indexes sources. Two files defining the same object are an error.
func NewSet(sources []*Source) (*Set, ErrorList) {
	s := &Set{
		Sources:            sources,
		Applications:       map[string]*Source{},
		Services:           map[ServiceKey]*Source{},
		Runtimes:           map[string]*Source{},
		Protections:        map[string]*Source{},
		DeliveryExtensions: map[string]*Source{},
		Registries:         map[string]*Source{},
		Webhooks:           map[string]*Source{},
		ReleaseChannels:    map[string][]*Source{},
	}
	var errs ErrorList
	dup := func(src, prev *Source, field string) {
		errs = append(errs, src.Errorf(field, "duplicate %s %q (also defined in %s)", src.Kind(), src.Name(), prev.Path))
	}
	put := func(m map[string]*Source, src *Source, field string) {
		if prev, ok := m[src.Name()]; ok {
			dup(src, prev, field)
			return
		}
		m[src.Name()] = src
	}
	for _, src := range sources {
		f := src.File
		switch {
		case f.Application != nil:
			put(s.Applications, src, "application.name")
		case f.Service != nil:
			k := ServiceKey{f.Service.Application, f.Service.Name}
			if prev, ok := s.Services[k]; ok {
				dup(src, prev, "service.name")
				continue
			}
			s.Services[k] = src
		case f.Runtime != nil:
			put(s.Runtimes, src, "runtime.name")
		case f.Protection != nil:
			put(s.Protections, src, "protection.name")
		case f.DeliveryExtension != nil:
			put(s.DeliveryExtensions, src, "deliveryExtension.name")
		case f.ContainerRegistry != nil:
			put(s.Registries, src, "containerRegistry.name")
		case f.Webhook != nil:
			put(s.Webhooks, src, "webhook.name")
		case f.ReleaseChannel != nil:
			app := f.ReleaseChannel.Application
			s.ReleaseChannels[app] = append(s.ReleaseChannels[app], src)
		}
	}
	return s, errs
}

// ServiceKeys returns the services in a stable order.
func (s *Set) ServiceKeys() []ServiceKey {
	keys := make([]ServiceKey, 0, len(s.Services))
	for k := range s.Services {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// RuntimeConfigs returns the runtime configs by name.
func (s *Set) RuntimeConfigs() map[string]*Runtime {
	out := make(map[string]*Runtime, len(s.Runtimes))
	for n, src := range s.Runtimes {
		out[n] = src.File.Runtime
	}
	return out
}

// RegistryConfigs returns the containerRegistry configs by name.
func (s *Set) RegistryConfigs() map[string]*ContainerRegistry {
	out := make(map[string]*ContainerRegistry, len(s.Registries))
	for n, src := range s.Registries {
		out[n] = src.File.ContainerRegistry
	}
	return out
}

// ProtectionConfigs returns the protection configs by name.
func (s *Set) ProtectionConfigs() map[string]*Protection {
	out := make(map[string]*Protection, len(s.Protections))
	for n, src := range s.Protections {
		out[n] = src.File.Protection
	}
	return out
}

// DeliveryExtensionConfigs returns the delivery extension configs by name.
func (s *Set) DeliveryExtensionConfigs() map[string]*DeliveryExtension {
	out := make(map[string]*DeliveryExtension, len(s.DeliveryExtensions))
	for n, src := range s.DeliveryExtensions {
		out[n] = src.File.DeliveryExtension
	}
	return out
}

// ApplicationConfig returns the application with its standalone release channels
// appended, or nil when the set does not define it.
func (s *Set) ApplicationConfig(name string) *Application {
	src, ok := s.Applications[name]
	if !ok {
		return nil
	}
	app := *src.File.Application
	if extra := s.ReleaseChannels[name]; len(extra) > 0 {
		app.ReleaseChannels = append([]ReleaseChannel(nil), app.ReleaseChannels...)
		for _, rc := range extra {
			app.ReleaseChannels = append(app.ReleaseChannels, *rc.File.ReleaseChannel)
		}
	}
	return &app
}

func sortStrings(s []string) { sort.Strings(s) }
