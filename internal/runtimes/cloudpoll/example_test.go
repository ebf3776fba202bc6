package cloudpoll_test

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/cloudpoll"
)

// A backend that reads one service per call. Fetch reads the instance at
// once the first time; after that it returns what the poller last read.
func Example() {
	p := cloudpoll.New(cloudpoll.Config[string]{
		Same: func(a, b string) bool { return a == b },
		Describe: cloudpoll.OneAtATime(func(_ context.Context, service string) cloudpoll.Result {
			return cloudpoll.Result{State: runtimes.State{Version: "v1", Converged: true, Message: service + " running"}}
		}),
	})
	defer p.Close()
	t := runtimes.Target{InstanceKey: runtimes.InstanceKey{Application: "shop", Service: "web", ReleaseChannel: "prod"}, Version: "v1"}
	st, err := p.Fetch(context.Background(), t, "web-prod")
	fmt.Println(st.Message, err)
	// Output: web-prod running <nil>
}
