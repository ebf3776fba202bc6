// Package podexec stands in for a kubelet in tests: on kwok's simulated nodes
// no container runs, so a test that needs what a Job's command does (real
// terraform planning a real module) runs the pods' commands on the test's
// host with this package.
//
// The pods must run as the service account ServiceAccount: kwok's
// drover-pod-run-on-host stage keeps those Running until they are labelled,
// instead of completing them at once.
//
// Start watches the pods of a namespace that match a label selector; for each
// new pod it runs the first container's command and args (with its plain env
// values, its working directory and the host variables Options.HostEnv names)
// on the host, once, then labels the pod drover.dev/exit-code with the exit
// code and annotates it drover.dev/termination-message with the end of the
// combined output. kwok's drover-pod-exit-code stage (hack/kube/kwok) then
// terminates the container with that code and message, as a kubelet would.
// The message stands in for the pod's log, which kwok cannot serve, so it is
// set whatever the exit code (a kubelet with FallbackToLogsOnError sets it
// only on failure).
package podexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// ServiceAccount is the service account of the pods whose commands a test
// runs: kwok holds them Running until they are labelled with an exit code.
const ServiceAccount = "drover-podexec"

// MaxMessage is how much of the output becomes the termination message
// (the end): the kubelet's limit for a termination message.
const MaxMessage = 4096

// Labels and annotations read by kwok's drover-pod-exit-code stage.
const (
	LabelExitCode     = "drover.dev/exit-code"
	AnnotationMessage = "drover.dev/termination-message"
)

// Options tune Start.
type Options struct {
	// HostEnv names variables of the test's environment the commands get
	// besides the pod's (PATH, HOME, a plugin cache).
	HostEnv []string
	// Env is added to every command's environment, after the pod's.
	Env map[string]string
}

// Run is one pod's command as it ran.
type Run struct {
	Pod            string
	Image          string
	ServiceAccount string
	Labels         map[string]string
	Argv           []string
	Env            map[string]string
	// FromSecrets names the variables read from Secrets (secretKeyRef).
	FromSecrets []string
	ExitCode    int
	Output      string
}

// Executor runs the pods' commands until the test ends.
type Executor struct {
	mu   sync.Mutex
	runs []Run
	seen map[types.UID]bool
	done chan struct{}
}

// Start runs, on the host, the command of every pod of namespace matching
// selector (a label selector), from now until the test ends.
func Start(t *testing.T, cs kubernetes.Interface, namespace, selector string, opts Options) *Executor {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		t.Fatalf("podexec: watch pods of %s: %v", namespace, err)
	}
	e := &Executor{seen: map[types.UID]bool{}, done: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-e.done
		wg.Wait()
	})
	go func() {
		defer close(e.done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) || pod.DeletionTimestamp != nil {
				continue
			}
			if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != corev1.PodRunning {
				continue
			}
			e.mu.Lock()
			first := !e.seen[pod.UID]
			e.seen[pod.UID] = true
			e.mu.Unlock()
			if !first {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.execute(ctx, t, cs, pod, opts)
			}()
		}
	}()
	return e
}

// Runs returns the commands run so far.
func (e *Executor) Runs() []Run {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.runs)
}

// execute runs pod's command and reports its outcome on the pod.
func (e *Executor) execute(ctx context.Context, t *testing.T, cs kubernetes.Interface, pod *corev1.Pod, opts Options) {
	c := pod.Spec.Containers[0]
	run := Run{Pod: pod.Name, Image: c.Image, ServiceAccount: pod.Spec.ServiceAccountName, Labels: pod.Labels, Env: map[string]string{}}
	run.Argv = append(slices.Clone(c.Command), c.Args...)
	var env []string
	for _, k := range opts.HostEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, v := range c.Env {
		value := v.Value
		if ref := v.ValueFrom; ref != nil {
			if ref.SecretKeyRef == nil {
				continue
			}
			// As a kubelet does: read the Secret's key.
			sec, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.SecretKeyRef.Name, metav1.GetOptions{})
			if err != nil {
				t.Logf("podexec: pod %s: variable %s: %v", pod.Name, v.Name, err)
				continue
			}
			value = string(sec.Data[ref.SecretKeyRef.Key])
			run.FromSecrets = append(run.FromSecrets, v.Name)
		}
		run.Env[v.Name] = value
		env = append(env, v.Name+"="+value)
	}
	for k, v := range opts.Env {
		env = append(env, k+"="+v)
	}
	var out bytes.Buffer
	if len(run.Argv) == 0 {
		run.ExitCode, out = 127, *bytes.NewBufferString("podexec: the container has no command (the image's entrypoint cannot run here)\n")
	} else {
		// The pod's command is what the test asked drover to run.
		cmd := exec.CommandContext(ctx, run.Argv[0], run.Argv[1:]...) //nolint:gosec // G204: running it is the point
		cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, c.WorkingDir, &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			run.ExitCode = ee.ExitCode()
		default:
			run.ExitCode = 127
			out.WriteString("podexec: " + err.Error() + "\n")
		}
	}
	if ctx.Err() != nil {
		return
	}
	run.Output = out.String()
	msg := run.Output
	if len(msg) > MaxMessage {
		msg = msg[len(msg)-MaxMessage:]
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]string{LabelExitCode: strconv.Itoa(run.ExitCode)},
		"annotations": map[string]string{AnnotationMessage: msg},
	}})
	if _, err := cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
		t.Logf("podexec: report the exit of pod %s: %v", pod.Name, err)
	}
	e.mu.Lock()
	e.runs = append(e.runs, run)
	e.mu.Unlock()
}
