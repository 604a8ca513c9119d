// Package client is the Go client of a weft daemon's local API, spoken over
// the daemon's Unix socket. A zero Client works: it finds the socket from
// $WEFT_HOME or ~/.weft. It imports neither libp2p nor the store, so any
// program can link it cheaply.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/weftmesh/weft/internal/jsonx"

	"github.com/weftmesh/weft/protocol/api"
)

// SocketName is the file name of the daemon's socket inside its home.
const SocketName = "weft.sock"

// DefaultHome returns the data dir clients and the daemon use when none is
// given: $WEFT_HOME, else ~/.weft.
func DefaultHome() string {
	if h := os.Getenv("WEFT_HOME"); h != "" {
		return h
	}
	if d, err := os.UserHomeDir(); err == nil {
		return filepath.Join(d, ".weft")
	}
	return ".weft"
}

// ErrNotRunning reports that no daemon listens on the socket.
var ErrNotRunning = errors.New("daemon not running")

// Error is an error answer of the API.
type Error struct {
	Status  int    // HTTP status
	Code    string // stable code, e.g. "unknown_space"
	Message string
}

func (e *Error) Error() string { return e.Message }

// IsCode reports whether err is an API error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Client talks to one daemon. The zero value is ready to use.
type Client struct {
	Home   string // data dir; "" = DefaultHome()
	Socket string // socket path; overrides Home
	// Dial, when set, opens connections to the daemon instead of its
	// socket (the daemon's own MCP server reaches its API in memory).
	Dial func(ctx context.Context) (net.Conn, error)

	once sync.Once
	hc   *http.Client
	fast fastConns // the send's fast path (fast.go)
}

// SocketPath returns the socket the client dials.
func (c *Client) SocketPath() string {
	if c.Socket != "" {
		return c.Socket
	}
	home := c.Home
	if home == "" {
		home = DefaultHome()
	}
	return filepath.Join(home, SocketName)
}

func (c *Client) http() *http.Client {
	c.once.Do(func() {
		path := c.SocketPath()
		dial := c.Dial
		if dial == nil {
			dial = func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			}
		}
		c.hc = &http.Client{Transport: &http.Transport{
			DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
			MaxIdleConnsPerHost: 16,
		}}
	})
	return c.hc
}

// do sends a request and decodes a JSON answer into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in, nil)
	return c.answer(method, path, resp, err, out)
}

// doBody is do of a request body encoded already.
func (c *Client) doBody(ctx context.Context, method, path string, body []byte, out any) error {
	resp, err := c.sendBody(ctx, method, path, bytes.NewReader(body), http.Header{"Content-Type": {"application/json"}})
	return c.answer(method, path, resp, err, out)
}

// answer decodes the JSON answer of a request into out (if not nil).
func (c *Client) answer(method, path string, resp *http.Response, err error, out any) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s answer: %w", method, path, err)
	}
	return nil
}

// send performs a request; a non-2xx answer becomes an *Error.
func (c *Client) send(ctx context.Context, method, path string, in any, hdr http.Header) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
		hdr = hdr.Clone()
		if hdr == nil {
			hdr = make(http.Header)
		}
		hdr.Set("Content-Type", "application/json")
	}
	return c.sendBody(ctx, method, path, body, hdr)
}

// sendBody performs a request with a raw body (which may stream); a
// non-2xx answer becomes an *Error.
func (c *Client) sendBody(ctx context.Context, method, path string, body io.Reader, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://weft"+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if c.Dial == nil {
		if err := CheckSocketPath(c.SocketPath(), 0); err != nil {
			return nil, err
		}
	}
	resp, err := c.http().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if isNoDaemon(err) {
			return nil, fmt.Errorf("%w (no socket at %s)", ErrNotRunning, c.SocketPath())
		}
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func isNoDaemon(err error) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return false
	}
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, errConnRefused)
}

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e api.Error
	if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
		return &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: fmt.Sprintf("daemon answered %s", resp.Status)}
}

// Metrics returns the daemon's metrics (GET /v1/metrics), in the
// Prometheus text format.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/metrics", nil, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("read GET /v1/metrics answer: %w", err)
	}
	return string(b), nil
}

// Node returns the daemon's identity and addresses.
func (c *Client) Node(ctx context.Context) (api.Node, error) {
	var n api.Node
	return n, c.do(ctx, http.MethodGet, "/v1/node", nil, &n)
}

// Status returns one look at the node: its identity, peers, spaces,
// outbox, handlers, sync and uptime.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var s api.Status
	return s, c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
}

// Peers lists connected peers.
func (c *Client) Peers(ctx context.Context) ([]api.Peer, error) {
	var p api.Peers
	return p.Peers, c.do(ctx, http.MethodGet, "/v1/peers", nil, &p)
}

// Connect dials a peer by a multiaddr that ends in /p2p/ID.
func (c *Client) Connect(ctx context.Context, addr string) (api.Peer, error) {
	var p api.Peer
	return p, c.do(ctx, http.MethodPost, "/v1/peers", api.ConnectRequest{Addr: addr}, &p)
}

// Spaces lists joined spaces.
func (c *Client) Spaces(ctx context.Context) ([]api.Space, error) {
	var s api.Spaces
	return s.Spaces, c.do(ctx, http.MethodGet, "/v1/spaces", nil, &s)
}

// JoinSpace joins a space as req says (name, and optionally retention);
// joining twice is fine.
func (c *Client) JoinSpace(ctx context.Context, req api.JoinRequest) (api.Space, error) {
	var s api.Space
	return s, c.do(ctx, http.MethodPost, "/v1/spaces", req, &s)
}

// Join joins a space by name; joining twice is fine.
func (c *Client) Join(ctx context.Context, name string) (api.Space, error) {
	var s api.Space
	return s, c.do(ctx, http.MethodPost, "/v1/spaces", api.JoinRequest{Name: name}, &s)
}

// Leave leaves a space (by name or ID).
func (c *Client) Leave(ctx context.Context, space string) error {
	return c.do(ctx, http.MethodDelete, "/v1/spaces/"+url.PathEscape(space), nil, nil)
}

// Send sends a message to a space and returns it as stored.
func (c *Client) Send(ctx context.Context, space string, req api.SendRequest) (api.Message, error) {
	var m api.Message
	return m, c.post(ctx, "/v1/spaces/"+url.PathEscape(space)+"/messages", req, &m)
}

// SendText sends {"text": text} as a message of type "text".
func (c *Client) SendText(ctx context.Context, space, text string) (api.Message, error) {
	content, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		return api.Message{}, err
	}
	return c.Send(ctx, space, api.SendRequest{Content: content, Type: "text"})
}

// Read returns up to limit messages after cursor ("" = from the start) in
// the daemon's order for the space. limit ≤ 0 uses the daemon's default.
func (c *Client) Read(ctx context.Context, space, after string, limit int) (api.Page, error) {
	var p api.Page
	return p, c.do(ctx, http.MethodGet, "/v1/spaces/"+url.PathEscape(space)+"/messages"+pageQuery(after, limit), nil, &p)
}

// Message returns one message by ID.
func (c *Client) Message(ctx context.Context, id string) (api.Message, error) {
	var m api.Message
	return m, c.do(ctx, http.MethodGet, "/v1/messages/"+url.PathEscape(id), nil, &m)
}

// Thread returns a message with its ancestors (up=true: what it replies to,
// and so on) or its descendants (the replies to it, and so on), nearest
// first, to at most depth steps (depth < 0: the daemon's default).
func (c *Client) Thread(ctx context.Context, id string, up bool, depth int) (api.Thread, error) {
	q := url.Values{"direction": {"descendants"}}
	if up {
		q.Set("direction", "ancestors")
	}
	if depth >= 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var t api.Thread
	return t, c.do(ctx, http.MethodGet, "/v1/messages/"+url.PathEscape(id)+"/thread?"+q.Encode(), nil, &t)
}

// marshal is jsonx.Marshal: agents' JSON as they wrote it.
var marshal = jsonx.Marshal
