package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The send's fast path. net/http's client hands each request between the
// caller's goroutine and two of its own per connection (writeLoop,
// readLoop); on a small machine those hand-offs were most of what a send
// cost its client (a third of the CPU the daemon spent on it), and that
// CPU is taken from the daemon when both share the cores. A send on the
// daemon's socket is instead written and its answer read by the caller's
// goroutine, on connections the client keeps (as many as net/http would),
// as HTTP/1.1 with net/http's own request framing and response parser. A
// connection is reused only if the daemon has not closed it meanwhile (a
// non-blocking peek, alive), so a daemon that restarted or closed an idle
// connection costs no failed send; a request is never sent twice. Without
// such a peek (other systems, or Client.Dial) sends take net/http's path.

// maxFastIdle is how many idle connections the fast path keeps
// (net/http's MaxIdleConnsPerHost here).
const maxFastIdle = 16

// fastConn is a connection of the fast path.
type fastConn struct {
	c  net.Conn
	br *bufio.Reader
}

// fastConns is the fast path's pool of idle connections.
type fastConns struct {
	mu   sync.Mutex
	idle []*fastConn
}

// get returns an idle connection the daemon has not closed, or nil.
func (p *fastConns) get() *fastConn {
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			return nil
		}
		fc := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if alive(fc.c) {
			return fc
		}
		_ = fc.c.Close()
	}
}

// put keeps fc for the next request, or closes it when enough are kept.
func (p *fastConns) put(fc *fastConn) {
	p.mu.Lock()
	if len(p.idle) < maxFastIdle {
		p.idle = append(p.idle, fc)
		fc = nil
	}
	p.mu.Unlock()
	if fc != nil {
		_ = fc.c.Close()
	}
}

// postFast POSTs body (JSON) to path and returns the answer's body, or
// ok=false when the fast path cannot be taken (then nothing was sent).
// A non-2xx answer is an *Error, as from send.
func (c *Client) postFast(ctx context.Context, path string, body []byte) (answer []byte, ok bool, err error) {
	if !fastPath || c.Dial != nil {
		return nil, false, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, true, err
	}
	fc := c.fast.get()
	if fc == nil {
		if err := CheckSocketPath(c.SocketPath(), 0); err != nil {
			return nil, true, err
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", c.SocketPath())
		if err != nil {
			if ctx.Err() != nil {
				return nil, true, ctx.Err()
			}
			if isNoDaemon(err) {
				return nil, true, fmt.Errorf("%w (no socket at %s)", ErrNotRunning, c.SocketPath())
			}
			return nil, true, err
		}
		fc = &fastConn{c: conn, br: bufio.NewReaderSize(conn, 4096)}
	}
	answer, keep, err := fc.roundTrip(ctx, path, body)
	if keep {
		c.fast.put(fc)
	} else {
		_ = fc.c.Close()
	}
	return answer, true, err
}

// roundTrip sends one POST on fc and reads its answer; keep reports
// whether fc can carry the next request.
func (fc *fastConn) roundTrip(ctx context.Context, path string, body []byte) (answer []byte, keep bool, err error) {
	// A ctx that ends (its deadline too) cuts the connection's deadline,
	// once ctx.Err() is set.
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { _ = fc.c.SetDeadline(time.Unix(1, 0)) })
		defer func() {
			if !stop() {
				keep = false // its deadline was cut
			}
			if err != nil && ctx.Err() != nil {
				err = ctx.Err()
			}
		}()
	}
	req := make([]byte, 0, 160+len(path)+len(body))
	req = append(req, "POST "...)
	req = append(req, path...)
	req = append(req, " HTTP/1.1\r\nHost: weft\r\nUser-Agent: Go-http-client/1.1\r\nContent-Type: application/json\r\nContent-Length: "...)
	req = strconv.AppendInt(req, int64(len(body)), 10)
	req = append(req, "\r\n\r\n"...)
	req = append(req, body...)
	if _, err := fc.c.Write(req); err != nil {
		return nil, false, err
	}
	resp, err := http.ReadResponse(fc.br, nil)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, false, decodeError(resp)
	}
	answer, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, false, err
	}
	return answer, !resp.Close && fc.br.Buffered() == 0, nil
}

// post POSTs in as JSON to path and decodes the answer into out, by the
// fast path where it can be taken, else as do does.
func (c *Client) post(ctx context.Context, path string, in, out any) error {
	b, err := encodeRequest(in)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	answer, ok, err := c.postFast(ctx, path, b)
	if !ok {
		return c.doBody(ctx, http.MethodPost, path, b, out)
	}
	if err != nil {
		return err
	}
	if err := decodeAnswer(answer, out); err != nil {
		return fmt.Errorf("decode %s %s answer: %w", http.MethodPost, path, err)
	}
	return nil
}
