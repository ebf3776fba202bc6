package desiredstate

// EnvSecretName names the Secret drover keeps, in each namespace a service
// instance's workloads run in, with the instance's secret env (rawSecret,
// and stored `secret` references once resolved): one key per variable,
// named like it. The compiler points the injected env at it
// (valueFrom.secretKeyRef) and the Kubernetes runtime writes it at apply,
// so the values never appear in the compiled objects. Application,
// service and release channel names are DNS labels, so the name is a valid
// Secret name, and it is the instance's alone even in a shared namespace.
func EnvSecretName(application, service, releaseChannel string) string {
	return "drover-env." + application + "." + service + "." + releaseChannel
}
