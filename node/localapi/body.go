package localapi

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// DefaultBodyTimeout is how long a client may take to send a request
// body unless configured otherwise. A local client sends the largest body
// (a message, 1 MiB) in milliseconds; a minute leaves room for a machine
// that stalls, and frees a connection whose client stalls for good.
const DefaultBodyTimeout = time.Minute

// BoundBodies bounds reading the body of each request h serves: all of it
// must arrive within timeout of the handler's start, or reading it fails
// (an i/o timeout) and the connection is closed, so that clients that
// send headers and then trickle or stop cannot hold connections (and file
// descriptors) forever. The deadline is lifted when the body ends, so a
// long streamed answer is not cut. A handler that reads a body for as long
// as something lasts extends the deadline with keepReading.
//
// net/http's ReadTimeout would bound the whole request, answer included,
// and ReadHeaderTimeout only the headers; this is set per request, on the
// connection, through http.ResponseController.
func BoundBodies(timeout time.Duration, h http.Handler) http.Handler {
	if timeout <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r) // no body: the server already watches the connection
			return
		}
		b := &boundBody{ReadCloser: r.Body, rc: http.NewResponseController(w), timeout: timeout}
		b.extend(time.Now().Add(timeout))
		r.Body = b
		h.ServeHTTP(w, r)
	})
}

// boundBody is a request body with a read deadline on its connection.
type boundBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration

	mu    sync.Mutex
	ended bool // read to its end: the deadline is lifted
}

func (b *boundBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		// Lift the deadline: net/http now reads the connection in the
		// background to notice a client that leaves, and a deadline there
		// would cancel the request's context in the middle of its answer.
		// After any other error it stays, so that net/http's own reads of
		// what is left of the body fail fast as well.
		b.mu.Lock()
		if !b.ended {
			b.ended = true
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		b.mu.Unlock()
	}
	return n, err
}

// extend moves the read deadline to t, unless the body has ended.
func (b *boundBody) extend(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ended {
		_ = b.rc.SetReadDeadline(t)
	}
}

// keepReading lets r's body take as long as alive reports true (checked
// every half timeout), and then at most the timeout more. It returns a
// function that stops it. Bodies BoundBodies did not wrap are unaffected.
func keepReading(r *http.Request, alive func() bool) (stop func()) {
	b, ok := r.Body.(*boundBody)
	if !ok {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(max(b.timeout/2, time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if !alive() {
					return // the deadline set last runs out
				}
				b.extend(time.Now().Add(b.timeout))
			case <-done:
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
