package server

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
)

// Limits of what one identity may ask: mutations per second (a token
// bucket per identity), and event streams open at once. The server's local
// token is not limited: it is the machine's own admin (drover dev, bench).

// Default limits (EdgeConfig overrides them).
const (
	// DefaultMutationRate is the mutations per second an identity may
	// send on average; DefaultMutationBurst how many at once.
	DefaultMutationRate  = 20
	DefaultMutationBurst = 100
	// DefaultMaxStreams is how many event streams one identity may hold
	// open at once.
	DefaultMaxStreams = 16
	// streamWriteTimeout bounds writing one batch of events to a stream: a
	// client that does not read loses its stream, not the server's memory.
	streamWriteTimeout = 30 * time.Second
	// streamRecheck is how often an event stream's credential is checked
	// again (at its next batch or heartbeat, 15 s at most apart).
	streamRecheck = 5 * time.Second
	// streamBatch is the least time between two reads of the store by one
	// event stream: a delay no one watching notices, which spares the
	// store a read per stream at every commit.
	streamBatch = 25 * time.Millisecond
)

// limiter holds the per-identity limits.
type limiter struct {
	rate       rate.Limit
	burst      int
	maxStreams int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	streams map[string]int
}

func newLimiter(perSecond float64, burst, maxStreams int) *limiter {
	if perSecond <= 0 {
		perSecond = DefaultMutationRate
	}
	if burst <= 0 {
		burst = DefaultMutationBurst
	}
	if maxStreams <= 0 {
		maxStreams = DefaultMaxStreams
	}
	return &limiter{rate: rate.Limit(perSecond), burst: burst, maxStreams: maxStreams,
		buckets: map[string]*rate.Limiter{}, streams: map[string]int{}}
}

// limited reports whether id goes unlimited.
func limited(id auth.Identity) bool { return id.Kind != auth.KindLocal || id.Session != 0 }

// mutation takes a token of id's bucket; when it is empty it returns how
// long until one is there.
func (l *limiter) mutation(id auth.Identity) (ok bool, retry time.Duration) {
	if !limited(id) {
		return true, 0
	}
	l.mu.Lock()
	b, found := l.buckets[id.Name]
	if !found {
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[id.Name] = b
	}
	l.mu.Unlock()
	r := b.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, d
	}
	return true, 0
}

// openStream counts a stream of id; it fails when id holds maxStreams.
// done must be called when the stream ends.
func (l *limiter) openStream(id auth.Identity) (done func(), err error) {
	if !limited(id) {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams[id.Name] >= l.maxStreams {
		return nil, errorf(apiv1.CodeResourceExhausted, "%s holds %d event streams open, as many as one identity may: close one first", id.Name, l.maxStreams)
	}
	l.streams[id.Name]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.streams[id.Name]--; l.streams[id.Name] <= 0 {
			delete(l.streams, id.Name)
		}
	}, nil
}

// tooMany answers 429 with when to try again.
func tooMany(w http.ResponseWriter, s *Server, id auth.Identity, retry time.Duration) {
	secs := int(math.Ceil(retry.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	writeError(w, s, errorf(apiv1.CodeResourceExhausted, "%s sends changes faster than %g per second (bursts of %d): try again in %s",
		id.Name, float64(s.limits.rate), s.limits.burst, retry.Round(time.Millisecond)))
}

// bodyError is the error of a request body that could not be read: 413
// when it is larger than the server takes.
func bodyError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errorf(apiv1.CodeTooLarge, "the request body is larger than %s, the most this server takes", sizeText(tooLarge.Limit))
	}
	return errorf(apiv1.CodeInvalidArgument, "invalid request body: %v", err)
}

func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
