package kubejob

import (
	"fmt"
	"log/slog"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/kubeobj"
	"github.com/drover-dev/drover/internal/runtimes"
	kuberuntime "github.com/drover-dev/drover/internal/runtimes/kubernetes"
)

// ProxyNamespacePrefix starts the namespace of a runtime's Jobs when its
// proxyRuntime names none: drover-proxy-runtime-<runtime name>.
const ProxyNamespacePrefix = "drover-proxy-runtime-"

// ProxyNamespace is where the Jobs of the runtime named runtime run, and
// whether drover creates that namespace: the namespace p names
// (containerOrchestration.k8s.namespace), which must exist and is never
// created nor deleted, or else drover-proxy-runtime-<runtime>, created
// when missing (cut to a DNS label).
func ProxyNamespace(runtime string, p *config.ProxyRuntime) (string, bool) {
	if p != nil && p.ContainerOrchestration != nil && p.ContainerOrchestration.K8s != nil && p.ContainerOrchestration.K8s.Namespace != "" {
		return p.ContainerOrchestration.K8s.Namespace, false
	}
	return kuberuntime.DNSLabel(ProxyNamespacePrefix + strings.ToLower(runtime)), true
}

// Connect returns a Runner for the cluster of kubeconfig and context (both
// "": the in-cluster configuration), with the Kubernetes runtime's client
// rate limits. It does not contact the cluster.
func Connect(kubeconfig, kubeContext string, log *slog.Logger) (*Runner, error) {
	rc, err := kuberuntime.RESTConfig(kubeconfig, kubeContext)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = kuberuntime.DefaultQPS, kuberuntime.DefaultBurst
	rc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(rc.QPS, rc.Burst)
	if rc.UserAgent == "" {
		rc.UserAgent = "drover"
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return New(cs, log), nil
}

// Labels of the Jobs that run a runtime's commands, besides the Kubernetes
// runtime's app.drover.dev/{application,service,release-channel}.
const (
	LabelRuntime = kubeobj.LabelRuntime
	LabelCommand = kubeobj.LabelCommand
)

// Labels identify the Job of one command (fetch, apply, plan, ...) of the
// runtime named runtime for instance k; a value that is not a valid label
// value is left out.
func Labels(runtime, command string, k runtimes.InstanceKey) map[string]string {
	out := map[string]string{}
	for name, v := range map[string]string{
		LabelRuntime:                runtime,
		LabelCommand:                command,
		kubeobj.LabelApplication:    k.Application,
		kubeobj.LabelService:        k.Service,
		kubeobj.LabelReleaseChannel: k.ReleaseChannel,
	} {
		if len(validation.IsValidLabelValue(v)) == 0 {
			out[name] = v
		}
	}
	return out
}
