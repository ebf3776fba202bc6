package auth

import (
	"fmt"
	"slices"
	"strings"
)

// Permission is what a request needs to be allowed: each API route declares
// one (the server's route table), and roles grant sets of them.
type Permission string

// The permissions, in the order roles grow.
const (
	// PermRead: see services, statuses, events, runs, configs, freezes.
	PermRead Permission = "read"
	// PermPush: push a service (and preview a push).
	PermPush Permission = "push"
	// PermOperate: pause, resume and roll back a release channel.
	PermOperate Permission = "operate"
	// PermApprove: approve or reject a manual approval.
	PermApprove Permission = "approve"
	// PermBypass: bypass a protection or extension for one version.
	PermBypass Permission = "bypass"
	// PermFreeze: freeze deployments and lift freezes.
	PermFreeze Permission = "freeze"
	// PermConfigure: apply configs.
	PermConfigure Permission = "configure"
	// PermRuntimes: link, unlink runtimes and rotate their tokens.
	PermRuntimes Permission = "runtimes"
	// PermTokens: create, list and revoke API tokens.
	PermTokens Permission = "tokens"
	// PermAudit: read the audit log.
	PermAudit Permission = "audit"
	// PermSecrets: set and delete the secrets drover keeps (listing their
	// names and versions needs read on every application).
	PermSecrets Permission = "secrets"
)

// Permissions lists every permission.
var Permissions = []Permission{PermRead, PermPush, PermOperate, PermApprove, PermBypass, PermFreeze,
	PermConfigure, PermRuntimes, PermTokens, PermAudit, PermSecrets}

// Role is a named set of permissions.
type Role string

// The roles.
const (
	RoleViewer   Role = "viewer"
	RoleDeployer Role = "deployer"
	RoleApprover Role = "approver"
	RoleAdmin    Role = "admin"
)

// Roles lists every role, least first.
var Roles = []Role{RoleViewer, RoleDeployer, RoleApprover, RoleAdmin}

// grants is what each role may do.
var grants = map[Role][]Permission{
	RoleViewer:   {PermRead},
	RoleDeployer: {PermRead, PermPush, PermOperate, PermSecrets},
	RoleApprover: {PermRead, PermApprove},
	RoleAdmin:    Permissions,
}

// Grants returns the permissions of role (nil for an unknown role).
func (r Role) Grants() []Permission { return grants[r] }

// Grants reports whether role r grants p.
func (r Role) grants(p Permission) bool { return slices.Contains(grants[r], p) }

// ParseRole returns the role named s (case-insensitive).
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if _, ok := grants[r]; !ok {
		return "", fmt.Errorf("unknown role %q: want one of %s", s, joinRoles())
	}
	return r, nil
}

func joinRoles() string {
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// Binding grants a role over a scope: every application (Application ""),
// one application, or one release channel of one application.
type Binding struct {
	Role           Role   `json:"role"`
	Application    string `json:"application,omitempty"`
	ReleaseChannel string `json:"releaseChannel,omitempty"`
}

// String is the binding as ParseBinding reads it: ROLE, ROLE@APP or
// ROLE@APP/CHANNEL.
func (b Binding) String() string {
	s := string(b.Role)
	if b.Application != "" {
		s += "@" + b.Application
		if b.ReleaseChannel != "" {
			s += "/" + b.ReleaseChannel
		}
	}
	return s
}

// ParseBinding reads ROLE (every application), ROLE@APP or
// ROLE@APP/CHANNEL.
func ParseBinding(s string) (Binding, error) {
	role, scope, scoped := strings.Cut(s, "@")
	r, err := ParseRole(role)
	if err != nil {
		return Binding{}, err
	}
	b := Binding{Role: r}
	if !scoped {
		return b, nil
	}
	app, rc, _ := strings.Cut(scope, "/")
	if app == "" || app == "*" || strings.ContainsAny(app, " \t@") || strings.ContainsAny(rc, " \t@/") || (strings.Contains(scope, "/") && rc == "") {
		return Binding{}, fmt.Errorf("invalid scope %q in %q: want ROLE, ROLE@APPLICATION or ROLE@APPLICATION/RELEASE_CHANNEL", scope, s)
	}
	b.Application, b.ReleaseChannel = app, rc
	return b, b.Validate()
}

// Validate checks the binding's role and that a release channel comes with
// an application.
func (b Binding) Validate() error {
	if _, ok := grants[b.Role]; !ok {
		return fmt.Errorf("unknown role %q: want one of %s", b.Role, joinRoles())
	}
	if b.ReleaseChannel != "" && b.Application == "" {
		return fmt.Errorf("binding %s: a release channel needs an application", b)
	}
	return nil
}

// covers reports whether the binding's scope includes (app, rc); rc "" asks
// for the whole application, app "" for every application.
func (b Binding) covers(app, rc string) bool {
	switch {
	case b.Application == "":
		return true
	case b.Application != app:
		return false
	}
	return b.ReleaseChannel == "" || b.ReleaseChannel == rc
}

// Can reports whether id may do p on release channel rc of application app:
// rc "" asks for the whole application (every channel), app "" for every
// application (what global resources such as runtimes and tokens need).
func (id Identity) Can(p Permission, app, rc string) bool {
	for _, b := range id.Bindings {
		if b.Role.grants(p) && b.covers(app, rc) {
			return true
		}
	}
	return false
}

// CanSome reports whether id may do p on some part of application app (one
// of its release channels, at least): the check before a request whose
// release channel is known only once its body is read.
func (id Identity) CanSome(p Permission, app string) bool {
	for _, b := range id.Bindings {
		if b.Role.grants(p) && (b.Application == "" || b.Application == app) {
			return true
		}
	}
	return false
}

// CanAny reports whether id may do p anywhere: the check before a request
// whose answer is filtered to what id may see (lists), or whose scope is
// in its body.
func (id Identity) CanAny(p Permission) bool {
	for _, b := range id.Bindings {
		if b.Role.grants(p) {
			return true
		}
	}
	return false
}
