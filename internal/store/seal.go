package store

import "fmt"

// What the stores do with their Sealer (nil: values are kept as they are).

// Seal is b as a store keeps it.
func Seal(s Sealer, b []byte) ([]byte, error) {
	if s == nil || b == nil {
		return b, nil
	}
	return s.Seal(b)
}

// Unseal is a kept value as it was given.
func Unseal(s Sealer, b []byte) ([]byte, error) {
	if s == nil || b == nil {
		return b, nil
	}
	return s.Open(b)
}

// UnsealConfig opens a kept config's body.
func UnsealConfig(s Sealer, c ConfigObject) (ConfigObject, error) {
	body, err := Unseal(s, c.Body)
	if err != nil {
		return ConfigObject{}, fmt.Errorf("config %s/%s version %d: %w", c.Kind, c.Name, c.Version, err)
	}
	c.Body = body
	return c, nil
}

// UnsealDesired opens a kept desired state's parameters and compiled form.
func UnsealDesired(s Sealer, ds DesiredState) (DesiredState, error) {
	var err error
	if ds.Params, err = Unseal(s, ds.Params); err == nil {
		ds.Compiled, err = Unseal(s, ds.Compiled)
	}
	if err != nil {
		return DesiredState{}, fmt.Errorf("desired state %s: %w", ds.ID, err)
	}
	return ds, nil
}

// UnsealAll opens each of list with unseal.
func UnsealAll[T any](list []T, unseal func(T) (T, error)) ([]T, error) {
	for i := range list {
		v, err := unseal(list[i])
		if err != nil {
			return nil, err
		}
		list[i] = v
	}
	return list, nil
}

// CurrentSealer is a Sealer that tells whether its current key sealed a
// value (sealing.Keyring): those values need no resealing.
type CurrentSealer interface {
	IsSealed(b []byte) (sealed, current bool)
}

// NeedsReseal reports whether a kept value must be sealed again to be
// sealed by s's current key.
func NeedsReseal(s Sealer, b []byte) bool {
	if cs, ok := s.(CurrentSealer); ok {
		_, current := cs.IsSealed(b)
		return !current
	}
	return true
}

// UnsealNotifyTarget opens t's Spec as the stores keep it.
func UnsealNotifyTarget(s Sealer, t NotifyTarget) (NotifyTarget, error) {
	spec, err := Unseal(s, t.Spec)
	if err != nil {
		return NotifyTarget{}, fmt.Errorf("notification target %s: %w", t.Name, err)
	}
	t.Spec = spec
	return t, nil
}
