// Command cloudrun-test-server serves the Cloud Run Admin API v2 test
// server (package cloudruntest) on a loopback address, for trying the
// Cloud Run runtime without Google Cloud:
//
//	go run ./internal/testing/cloudruntest/cmd/cloudrun-test-server -listen 127.0.0.1:8099
//	CLOUD_RUN_EMULATOR_HOST=127.0.0.1:8099 drover server
//
// It prints (on stderr) the API calls it served, by method, when it stops.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/drover-dev/drover/internal/testing/cloudruntest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8099", "loopback address to listen on")
	ready := flag.Duration("ready-delay", 2*time.Second, "how long a new revision takes to become ready")
	flag.Parse()
	s := cloudruntest.New()
	s.ReadyDelay = *ready
	if err := s.Start(*listen); err != nil {
		fmt.Fprintln(os.Stderr, "cloudrun-test-server:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "Cloud Run Admin API v2 test server on %s (CLOUD_RUN_EMULATOR_HOST=%s)\n", s.Addr(), s.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	s.Close()
	fmt.Fprintf(os.Stderr, "calls served: %v\n", s.Calls())
}
