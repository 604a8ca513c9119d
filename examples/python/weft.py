"""weft: a Python client for the local API of a weft daemon.

A weft daemon serves JSON over HTTP/1.1 on the Unix socket
``$WEFT_HOME/weft.sock``. This module speaks that API with the standard
library only (Python 3.9 or newer): copy the one file next to your agent.

The socket is the one given to :class:`Client`, else ``$WEFT_HOME/weft.sock``,
else ``~/.weft/weft.sock``. Every failed API call raises :class:`WeftError`
with the daemon's HTTP status and stable error code; a daemon that is not
running raises :class:`DaemonNotRunning` (a ``WeftError``).

Example::

    import weft

    c = weft.Client()                       # $WEFT_HOME/weft.sock
    me = c.node()["id"]
    c.join("research")
    c.send("research", {"text": "hello"}, type="text")
    for msg in c.follow("research"):        # history, then live
        print(msg["from"], msg["content"])

    # Serve calls: return a value for a unary call; yield deltas (and
    # return the final output) for a stream call.
    def word_count(call):
        words = call.input["text"].split()
        for i, w in enumerate(words):
            yield {"word": w, "n": i + 1}
        return {"words": len(words)}

    # Handlers take calls from the peers this daemon trusts (allow=
    # ["anyone"] opens one to every peer, a peer ID to that peer).
    c.trust(other.node()["id"], name="other")
    with c.handle("word_count", word_count):
        print(other.invoke(me, "word_count", {"text": "a b c"}))   # {"words": 3}
        for frame in other.invoke_stream(me, "word_count", {"text": "a b"}):
            print(frame["kind"], frame.get("data"))
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import threading
import types
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

__all__ = [
    "Call",
    "Client",
    "DaemonNotRunning",
    "Handler",
    "Reply",
    "Stream",
    "WeftError",
    "default_socket",
    "parse_sse",
]

SOCKET_NAME = "weft.sock"
"""The file name of the daemon's socket inside its home."""

MAX_LINE = 16 << 20
"""The longest line of a streamed answer this client accepts (bytes)."""

_log = logging.getLogger("weft")

# HTTP status for the call error codes of stream frames, as the daemon
# answers them for unary calls.
_CALL_STATUS = {
    "bad_request": 400,
    "forbidden": 403,
    "no_handler": 404,
    "unknown_call": 404,
    "cancelled": 409,
    "internal": 500,
    "unreachable": 503,
    "overloaded": 503,
    "deadline_exceeded": 504,
}


class WeftError(Exception):
    """An error answer of the daemon, or a stream that broke off.

    Attributes:
        status: the HTTP status (``None`` when there was no HTTP answer).
        code: the API's stable error code, e.g. ``"unknown_space"``.
        message: the daemon's human-readable explanation.
    """

    def __init__(self, status: Optional[int], code: str, message: str):
        super().__init__(status, code, message)
        self.status = status
        self.code = code
        self.message = message

    def __str__(self) -> str:
        where = " (HTTP %d)" % self.status if self.status else ""
        return "%s [%s]%s" % (self.message, self.code, where)


class DaemonNotRunning(WeftError, ConnectionError):
    """No daemon listens on the socket (it is missing or refuses connections)."""

    def __init__(self, path: str):
        super().__init__(None, "not_running", "daemon not running (no socket at %s)" % path)
        self.path = path


def default_socket() -> str:
    """Returns the socket a client uses when given none.

    That is ``$WEFT_HOME/weft.sock``, else ``~/.weft/weft.sock``.
    """
    home = os.environ.get("WEFT_HOME")
    if not home:
        home = os.path.join(os.path.expanduser("~"), ".weft")
    return os.path.join(home, SOCKET_NAME)


class _UnixConnection(http.client.HTTPConnection):
    """An HTTP/1.1 connection over a Unix socket."""

    def __init__(self, path: str, timeout: Optional[float]):
        super().__init__("weft", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        """Opens the Unix socket; a missing or dead one raises DaemonNotRunning."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            sock.close()
            raise DaemonNotRunning(self._path) from e
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def _dumps(value: Any) -> bytes:
    """Encodes value as compact UTF-8 JSON (strict: no NaN or infinity)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _q(part: str) -> str:
    """URL-escapes one path segment."""
    return urllib.parse.quote(str(part), safe="")


def _duration(seconds: float) -> str:
    """Formats seconds as a Go duration, e.g. 1.5 -> "1500ms"."""
    return "%dms" % max(1, round(float(seconds) * 1000))


def _as_list(v: Union[None, str, Sequence[str]]) -> List[str]:
    """Returns v as a list: None -> [], "x" -> ["x"]."""
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    return list(v)


def _content(content: Any) -> Any:
    """A str is shorthand for {"text": content}; anything else goes as is."""
    if isinstance(content, str):
        return {"text": content}
    return content


def _error_from(resp: http.client.HTTPResponse) -> WeftError:
    """Builds the WeftError of a non-2xx answer."""
    try:
        raw = resp.read(64 << 10)
    except (OSError, http.client.HTTPException):
        raw = b""
    try:
        body = json.loads(raw)
        err = body["error"]
        if err.get("code"):
            return WeftError(resp.status, err["code"], err.get("message", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return WeftError(resp.status, "http_%d" % resp.status, "daemon answered %d %s" % (resp.status, resp.reason))


def _lines(resp: http.client.HTTPResponse, limit: int = MAX_LINE) -> Iterator[bytes]:
    """Yields the lines of a streamed answer (with their line ends) until EOF."""
    while True:
        line = resp.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            raise WeftError(None, "too_large", "a streamed line is over %d bytes" % limit)
        yield line


def parse_sse(lines: Iterable[bytes]) -> Iterator[Tuple[str, str, Optional[str]]]:
    """Parses server-sent events from an iterable of raw lines.

    Yields ``(event, data, last_event_id)`` for every dispatched event,
    following the EventSource rules: ``data:`` lines accumulate (joined by
    newlines), one space after the colon is dropped, lines starting with
    ``:`` are comments, an event without data is not dispatched, the event
    type defaults to ``"message"``, and the last ``id:`` seen carries over
    to later events. Lines may end in ``\\n`` or ``\\r\\n``.
    """
    event, data, last_id = "", [], None  # type: str, List[str], Optional[str]
    for raw in lines:
        line = raw.decode("utf-8")
        if line.endswith("\n"):
            line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
        if line == "":
            if data:
                yield (event or "message", "\n".join(data), last_id)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
        elif field == "id" and "\0" not in value:
            last_id = value


class Stream:
    """A streamed answer of the daemon: an iterator that can be closed.

    Iterate it for the items (messages of ``follow``, frames of
    ``invoke_stream``). ``close()`` may be called from any thread, also while
    another thread waits for the next item: that iteration then ends
    quietly. A stream is also closed when it is garbage collected or used
    as a context manager, so breaking out of a ``for`` loop over an unnamed
    stream closes it (and cancels a stream call).

    Attributes:
        cursor: for event streams, the cursor of the last message yielded
            (pass it as ``after`` to resume without loss).
    """

    def __init__(self, conn: _UnixConnection, resp: http.client.HTTPResponse,
                 parse: Callable[["Stream", http.client.HTTPResponse], Iterator[Any]]):
        self._conn = conn
        self._lock = threading.Lock()
        self._closed = False
        self._head = []  # type: List[Any]
        self.cursor = None  # type: Optional[str]
        self._items = parse(self, resp)

    def _prime(self) -> None:
        """Reads the first item now (so its errors raise now) and keeps it for the iteration."""
        self._head.append(next(self))

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Any:
        if self._head:
            return self._head.pop()
        if self._closed:
            raise StopIteration
        try:
            return next(self._items)
        except StopIteration:
            self.close()
            raise
        except Exception:
            if self._closed:  # closed by another thread while reading
                raise StopIteration from None
            self.close()
            raise

    @property
    def closed(self) -> bool:
        """Whether the stream was closed (by close() or at its end)."""
        return self._closed

    def close(self) -> None:
        """Closes the stream; safe to call from any thread, and more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a reader blocked in recv
            except OSError:
                pass
        self._conn.close()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _message_events(stream: Stream, resp: http.client.HTTPResponse) -> Iterator[Dict[str, Any]]:
    """Turns an SSE answer into message dicts, each with its cursor."""
    for event, data, last_id in parse_sse(_lines(resp)):
        if event == "error":
            try:
                msg = json.loads(data)
            except ValueError:
                msg = data
            raise WeftError(503, "unavailable", "event stream failed: %s" % msg)
        if event != "message" or not data.strip():
            continue
        m = json.loads(data)
        if not m.get("cursor") and last_id:
            m["cursor"] = last_id
        stream.cursor = m.get("cursor")
        yield m
    raise WeftError(None, "stream_closed", "the daemon closed the event stream")


def _call_frames(stream: Stream, resp: http.client.HTTPResponse) -> Iterator[Dict[str, Any]]:
    """Turns a stream invoke's NDJSON answer into frames; an error frame raises."""
    for line in _lines(resp):
        if not line.strip():
            continue
        frame = json.loads(line)
        if frame.get("kind") == "error":
            err = frame.get("error") or {}
            code = err.get("code") or "handler_failed"
            raise WeftError(_CALL_STATUS.get(code, 502), code, err.get("message") or "the call failed")
        yield frame
        if frame.get("kind") == "final":
            return
    raise WeftError(None, "stream_closed", "the call stream ended without a final frame")


_DEFAULT = object()  # "use the client's timeout"


class Client:
    """A client of one weft daemon, safe to share between threads.

    Each request opens its own connection to the Unix socket, so calls from
    several threads never interfere.

    Args:
        socket_path: the daemon's socket; default ``home/weft.sock``.
        home: the daemon's home (data dir); default ``$WEFT_HOME``, else
            ``~/.weft``.
        timeout: seconds to wait for an ordinary answer (``None``: forever).
            Calls and discovery add their own time limit to it; streams
            wait forever.
    """

    def __init__(self, socket_path: Optional[str] = None, home: Optional[str] = None,
                 timeout: Optional[float] = 30.0):
        if socket_path:
            self.socket_path = socket_path
        elif home:
            self.socket_path = os.path.join(home, SOCKET_NAME)
        else:
            self.socket_path = default_socket()
        self.timeout = timeout

    def __repr__(self) -> str:
        return "weft.Client(%r)" % self.socket_path

    # -- plumbing -------------------------------------------------------

    def _open(self, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
              timeout: Any = _DEFAULT) -> Tuple[_UnixConnection, http.client.HTTPResponse]:
        """Sends a request and returns the open connection and its 2xx answer.

        body may be bytes (sent as is), an iterator of bytes (sent chunked,
        as it is produced) or any other value (sent as JSON).
        """
        conn = _UnixConnection(self.socket_path, self.timeout if timeout is _DEFAULT else timeout)
        hdrs = {"Accept": "application/json"}
        data = body
        if body is not None and not isinstance(body, (bytes, bytearray, types.GeneratorType)):
            data = _dumps(body)
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
        except socket.timeout:
            conn.close()
            raise TimeoutError("no answer from the daemon to %s %s in time" % (method, path)) from None
        except BaseException:
            conn.close()
            raise
        if resp.status // 100 != 2:
            err = _error_from(resp)
            conn.close()
            raise err
        return conn, resp

    def request(self, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
                timeout: Any = _DEFAULT) -> Any:
        """Makes one API request and returns its decoded JSON answer.

        This is the escape hatch for routes without a method here. path
        starts with ``/v1/``; body is as for a JSON request (bytes go as
        they are). An empty answer returns ``None``; an error answer raises
        WeftError.
        """
        conn, resp = self._open(method, path, body, headers, timeout)
        try:
            raw = resp.read()
        except socket.timeout:
            raise TimeoutError("no answer from the daemon to %s %s in time" % (method, path)) from None
        finally:
            conn.close()
        if not raw.strip():
            return None
        return json.loads(raw)

    def _stream(self, method: str, path: str, parse: Callable[[Stream, http.client.HTTPResponse], Iterator[Any]],
                body: Any = None, headers: Optional[Dict[str, str]] = None) -> Stream:
        """Opens a streamed answer (no time limit) and wraps it in a Stream."""
        conn, resp = self._open(method, path, body, headers, timeout=None)
        return Stream(conn, resp, parse)

    def _events(self, path: str, after: Optional[str]) -> Stream:
        """Opens an SSE route, resuming after a cursor."""
        hdrs = {"Accept": "text/event-stream"}
        if after:
            hdrs["Last-Event-ID"] = after
        return self._stream("GET", path, _message_events, headers=hdrs)

    @staticmethod
    def _page_query(after: Optional[str], limit: Optional[int]) -> str:
        """Builds ?after=&limit= (empty when neither is given)."""
        q = {}
        if after:
            q["after"] = after
        if limit:
            q["limit"] = str(int(limit))
        return "?" + urllib.parse.urlencode(q) if q else ""

    # -- node and peers -------------------------------------------------

    def node(self) -> Dict[str, Any]:
        """This daemon: ``{"id", "addrs", "version"}``."""
        return self.request("GET", "/v1/node")

    def peers(self) -> List[Dict[str, Any]]:
        """The connected peers, each ``{"id", "addrs", "direction"}``."""
        return self.request("GET", "/v1/peers")["peers"]

    def connect(self, addr: str) -> Dict[str, Any]:
        """Dials a peer by a multiaddr ending in ``/p2p/ID``."""
        return self.request("POST", "/v1/peers", {"addr": addr})

    # -- spaces ---------------------------------------------------------

    def join(self, space: str, max_count: Optional[int] = None, max_age: Optional[str] = None) -> Dict[str, Any]:
        """Joins a space by name (idempotent) and returns it.

        max_count and max_age (a Go duration such as ``"720h"``) optionally
        bound what this node keeps of the space.
        """
        body = {"name": space}  # type: Dict[str, Any]
        if max_count is not None or max_age is not None:
            ret = {}  # type: Dict[str, Any]
            if max_count is not None:
                ret["max_count"] = max_count
            if max_age is not None:
                ret["max_age"] = max_age
            body["retention"] = ret
        return self.request("POST", "/v1/spaces", body)

    def leave(self, space: str) -> None:
        """Leaves a space (its messages are kept)."""
        self.request("DELETE", "/v1/spaces/" + _q(space))

    def spaces(self) -> List[Dict[str, Any]]:
        """The joined spaces."""
        return self.request("GET", "/v1/spaces")["spaces"]

    # -- private spaces -------------------------------------------------

    def create(self, name: str, sealed: bool = False) -> Dict[str, Any]:
        """Creates a private (members-only) space owned by this node and returns it.

        sealed also encrypts its content end to end (read and send are unchanged).
        """
        body = {"name": name}  # type: Dict[str, Any]
        if sealed:
            body["sealed"] = True
        return self.request("POST", "/v1/private", body)

    def invite(self, space: str, peer: Optional[str] = None, role: str = "member",
               expires: Optional[str] = None) -> str:
        """Returns an invite token to a private space: for ``peer`` only, or for any holder.

        role is ``"member"`` or ``"admin"``; expires is a Go duration such as ``"24h"`` (the default).
        """
        body = {"role": role}  # type: Dict[str, Any]
        if peer:
            body["peer"] = peer
        if expires:
            body["expires"] = expires
        return self.request("POST", "/v1/spaces/" + _q(space) + "/invites", body)["token"]

    def join_invite(self, token: str) -> Dict[str, Any]:
        """Joins a private space by an invite token and returns it (its history is in)."""
        return self.request("POST", "/v1/join", {"invite": token})

    def members(self, space: str) -> List[Dict[str, Any]]:
        """The members of a private space: ``[{"peer": ID, "role": "owner"|"admin"|"member"}]``."""
        return self.request("GET", "/v1/spaces/" + _q(space) + "/members")["members"]

    def remove(self, space: str, peer: str) -> Dict[str, Any]:
        """Removes a member of a private space; returns the removal message."""
        return self.request("DELETE", "/v1/spaces/" + _q(space) + "/members/" + _q(peer))

    def space(self, space: str) -> Dict[str, Any]:
        """One joined space, by name or ID."""
        return self.request("GET", "/v1/spaces/" + _q(space))

    def send(self, space: str, content: Any, type: Optional[str] = None,
             refs: Optional[Dict[str, List[str]]] = None,
             reply_to: Union[None, str, Sequence[str]] = None,
             to: Union[None, str, Sequence[str]] = None,
             ttl: Optional[int] = None, meta: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        """Sends a message to a joined space and returns it as stored.

        Args:
            space: the space's name or ID.
            content: a dict (a str is shorthand for ``{"text": content}``).
            type: the message type (the daemon's default is ``"text"``).
            refs: ``{"messages": [...], "nodes": [...]}`` as is.
            reply_to: message ID(s) added to ``refs.messages``.
            to: peer ID(s) addressed, added to ``refs.nodes``.
            ttl: seconds the message lives.
            meta: string metadata (``local.*`` keys stay on this node).
        """
        body = {"content": _content(content)}  # type: Dict[str, Any]
        if type:
            body["type"] = type
        msgs = list((refs or {}).get("messages") or []) + _as_list(reply_to)
        nodes = list((refs or {}).get("nodes") or []) + _as_list(to)
        if msgs or nodes:
            body["refs"] = {k: v for k, v in (("messages", msgs), ("nodes", nodes)) if v}
        if ttl:
            body["ttl"] = int(ttl)
        if meta:
            body["meta"] = meta
        return self.request("POST", "/v1/spaces/%s/messages" % _q(space), body)

    def read(self, space: str, after: Optional[str] = None,
             limit: Optional[int] = None) -> Tuple[List[Dict[str, Any]], str]:
        """Reads a page of a space in this node's order.

        Returns ``(messages, next_cursor)``; pass next_cursor as ``after`` to
        continue (it is unchanged when nothing is new). limit is 1..1000
        (the daemon's default is 100).
        """
        page = self.request("GET", "/v1/spaces/%s/messages%s" % (_q(space), self._page_query(after, limit)))
        return page["messages"], page["next"]

    def follow(self, space: str, after: Optional[str] = None) -> Stream:
        """Streams a space: every message after the cursor, then new ones live.

        Returns a :class:`Stream` of message dicts, each with its
        ``cursor``. Nothing is lost to a slow reader; resume with the last
        cursor (``stream.cursor``). The stream raises WeftError
        ``stream_closed`` if the daemon goes away.
        """
        return self._events("/v1/spaces/%s/events" % _q(space), after)

    def message(self, id: str) -> Dict[str, Any]:
        """One message by ID."""
        return self.request("GET", "/v1/messages/" + _q(id))

    def thread(self, id: str, direction: str = "ancestors", depth: Optional[int] = None) -> Dict[str, Any]:
        """A message with its ancestors or descendants (``direction``), nearest first."""
        q = {"direction": direction}
        if depth is not None:
            q["depth"] = str(int(depth))
        return self.request("GET", "/v1/messages/%s/thread?%s" % (_q(id), urllib.parse.urlencode(q)))

    # -- direct messages ------------------------------------------------

    def dm(self, to: str, content: Any, kind: str = "event", reply_to: Optional[str] = None,
           ttl: Optional[int] = None, meta: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        """Sends a signed direct message to a peer.

        kind is ``request``, ``response``, ``event``, ``error`` or
        ``heartbeat``; reply_to (a message ID in this node's inbox) makes it
        inherit the request's correlation, trace and session. ttl is in
        seconds (also how long the outbox retries). Returns
        ``{"message", "status", "deadline"}`` where status is
        ``"delivered"`` or ``"queued"``.
        """
        body = {"to": to, "kind": kind, "content": _content(content)}  # type: Dict[str, Any]
        if reply_to:
            body["reply_to"] = reply_to
        if ttl:
            body["ttl"] = int(ttl)
        if meta:
            body["meta"] = meta
        return self.request("POST", "/v1/dm", body)

    def inbox(self, after: Optional[str] = None, limit: Optional[int] = None) -> Tuple[List[Dict[str, Any]], str]:
        """Reads a page of the direct messages received: ``(messages, next_cursor)``."""
        page = self.request("GET", "/v1/inbox" + self._page_query(after, limit))
        return page["messages"], page["next"]

    def follow_inbox(self, after: Optional[str] = None) -> Stream:
        """Streams the inbox like :meth:`follow`: replay after the cursor, then live."""
        return self._events("/v1/inbox/events", after)

    def outbox(self, to: Optional[str] = None) -> List[Dict[str, Any]]:
        """The direct messages waiting for delivery (to one peer, or all)."""
        q = "?" + urllib.parse.urlencode({"to": to}) if to else ""
        return self.request("GET", "/v1/outbox" + q)["messages"]

    def dead_letters(self, after: Optional[str] = None, limit: Optional[int] = None) -> Tuple[List[Dict[str, Any]], str]:
        """A page of the direct messages that could not be delivered, with the reason."""
        page = self.request("GET", "/v1/deadletters" + self._page_query(after, limit))
        return page["messages"], page.get("next", "")

    def sent(self, after: Optional[str] = None, limit: Optional[int] = None) -> Tuple[List[Dict[str, Any]], str]:
        """A page of the direct messages that were delivered, oldest first (the
        daemon keeps the last 1,000 within 7 days): to, kind, delivered_at, attempts."""
        page = self.request("GET", "/v1/sent" + self._page_query(after, limit))
        return page["messages"], page.get("next", "")

    # -- calls ----------------------------------------------------------

    def _invoke_body(self, peer: str, name: str, input: Any, timeout: Optional[float],
                     meta: Optional[Dict[str, str]], parent: Optional[str], stream: bool) -> Dict[str, Any]:
        """Builds the body of POST /v1/invoke."""
        body = {"peer": peer, "name": name}  # type: Dict[str, Any]
        if input is not None:
            body["input"] = input
        if timeout:
            body["timeout"] = _duration(timeout)
        if meta:
            body["meta"] = meta
        if parent:
            body["parent"] = parent
        if stream:
            body["stream"] = True
        return body

    def invoke_full(self, peer: str, name: str, input: Any = None, timeout: Optional[float] = None,
                    meta: Optional[Dict[str, str]] = None, parent: Optional[str] = None) -> Dict[str, Any]:
        """Like :meth:`invoke`, but returns the whole answer ``{"output", "meta"}``."""
        body = self._invoke_body(peer, name, input, timeout, meta, parent, False)
        wait = (timeout or 60.0) + (self.timeout or 0) + 5  # the daemon's default is 60s
        return self.request("POST", "/v1/invoke", body, timeout=wait)

    def invoke(self, peer: str, name: str, input: Any = None, timeout: Optional[float] = None,
               meta: Optional[Dict[str, str]] = None, parent: Optional[str] = None) -> Any:
        """Calls a peer's handler and returns its output.

        Args:
            peer: the callee's peer ID.
            name: the handler's name.
            input: any JSON value.
            timeout: seconds for the whole call (the daemon's default is 60).
            meta: string metadata (``traceparent``, ``session``, ...).
            parent: the ID of a call this node serves that this call is made
                for (its trace and session are inherited); see
                :meth:`Call.invoke`.

        Raises WeftError with the codes ``no_handler`` (404), ``forbidden``
        (403: the peer's handler does not take calls from this node),
        ``unreachable`` / ``overloaded`` (503), ``deadline_exceeded`` (504),
        ``handler_failed`` (502), ``bad_request`` or ``bad_peer`` (400).
        """
        return self.invoke_full(peer, name, input, timeout, meta, parent)["output"]

    def invoke_stream(self, peer: str, name: str, input: Any = None, timeout: Optional[float] = None,
                      meta: Optional[Dict[str, str]] = None, parent: Optional[str] = None) -> Stream:
        """Makes a stream call; returns a :class:`Stream` of frames.

        Frames are dicts ``{"seq", "kind", "data", "meta"}`` in order:
        ``started``, ``delta``..., ``final``; the stream ends after the
        final frame. An error frame raises WeftError with its code.
        Closing the stream early cancels the remote handler. Failures before
        the call starts (``no_handler``, ``unreachable``) raise here: it
        returns once the callee's daemon has handed the call to a handler.
        """
        body = self._invoke_body(peer, name, input, timeout, meta, parent, True)
        stream = self._stream("POST", "/v1/invoke", _call_frames, body=body,
                              headers={"Accept": "application/x-ndjson"})
        stream._prime()  # the started frame, or the error that the call could not start
        return stream

    def handle(self, names: Union[str, Sequence[str]], fn: Callable[["Call"], Any], concurrency: int = 16,
               capabilities: Optional[Sequence[Union[str, Dict[str, Any]]]] = None,
               allow: Union[None, str, Sequence[str]] = None) -> "Handler":
        """Serves calls to names with fn until the returned Handler is closed.

        fn(call) gets a :class:`Call` and runs in a worker thread (up to
        concurrency at once). For a unary call, its return value is the
        output. For a stream call, fn may return a generator: each yielded
        value becomes a delta frame and the generator's return value the
        final output (a plain return value is a final frame without
        deltas). Returning a :class:`Reply` adds meta to the answer. If fn
        raises, the call fails with ``handler_failed`` (or the code of a
        WeftError it raises). When the caller cancels, ``call.cancelled`` is
        set and the generator is closed at its next yield.

        capabilities (names or dicts ``{"name", "description",
        "input_schema", "output_schema"}``) describe the names on the agent
        card. allow says who may call: ``"trusted"`` (the peers on
        :meth:`trusted`; the default), ``"anyone"``, or peer IDs; others get
        ``forbidden`` and never reach fn. ``handler.allow`` is the policy
        as the daemon understood it. Returns once the daemon has registered
        the handler.
        """
        return Handler(self, _as_list(names), fn, concurrency, capabilities, _as_list(allow))

    # -- trust ----------------------------------------------------------

    def trust(self, peer: str, name: Optional[str] = None) -> Dict[str, Any]:
        """Puts peer on the trust list (again: replaces its name).

        Trusted peers may call the handlers that allow ``"trusted"`` (the
        default) and send direct messages without the limits strangers
        have. Returns ``{"peer", "name", "added"}``.
        """
        body = {"peer": peer}  # type: Dict[str, Any]
        if name:
            body["name"] = name
        return self.request("POST", "/v1/trust", body)

    def untrust(self, peer: str) -> bool:
        """Takes peer off the trust list; returns whether it was on it."""
        return self.request("DELETE", "/v1/trust/%s" % _q(peer))["removed"]

    def trusted(self) -> List[Dict[str, Any]]:
        """The trusted peers: a list of ``{"peer", "name", "added"}``."""
        return self.request("GET", "/v1/trust")["peers"]

    # -- cards and discovery --------------------------------------------

    def card(self) -> Dict[str, Any]:
        """This node's agent card."""
        return self.request("GET", "/v1/card")

    def set_card(self, name: Optional[str] = None, description: Optional[str] = None,
                 capabilities: Optional[Sequence[Union[str, Dict[str, Any]]]] = None) -> Dict[str, Any]:
        """Replaces the given fields of this node's card; returns the whole card.

        capabilities are names or dicts ``{"name", "description", ...}``;
        handlers add their own names to the card.
        """
        body = {}  # type: Dict[str, Any]
        if name is not None:
            body["name"] = name
        if description is not None:
            body["description"] = description
        if capabilities is not None:
            body["capabilities"] = _capabilities(capabilities)
        return self.request("PUT", "/v1/card", body)

    def peer_card(self, peer: str) -> Dict[str, Any]:
        """A peer's agent card."""
        return self.request("GET", "/v1/peers/%s/card" % _q(peer))

    def health(self, peer: str) -> Dict[str, Any]:
        """A peer's heartbeat: status, active calls, load, round-trip time."""
        return self.request("GET", "/v1/peers/%s/health" % _q(peer))

    def discover(self, capability: str, limit: Optional[int] = None,
                 timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """The peers that offer a capability: a list of ``{"card", "addrs"}``.

        timeout bounds the search in seconds (the daemon's default is 10).
        """
        q = {"capability": capability}
        if limit:
            q["limit"] = str(int(limit))
        if timeout:
            q["timeout"] = _duration(timeout)
        wait = (timeout or 10.0) + (self.timeout or 0) + 5
        return self.request("GET", "/v1/discover?" + urllib.parse.urlencode(q), timeout=wait)["providers"]


def _capabilities(caps: Sequence[Union[str, Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """Normalizes capability names to capability dicts."""
    return [{"name": c} if isinstance(c, str) else dict(c) for c in caps]


class Reply:
    """A handler's answer with metadata: ``return Reply(output, meta={...})``.

    For a stream call, a generator may return a Reply as its final output.
    """

    def __init__(self, output: Any = None, meta: Optional[Dict[str, str]] = None):
        self.output = output
        self.meta = meta


class Call:
    """A call being served by a :class:`Handler`.

    Attributes:
        id: the call's ID on this daemon.
        name: the name called.
        caller: the caller's peer ID.
        input: the decoded input (``None`` when there was none).
        meta: the call's metadata (traceparent, session, correlation...).
        stream: whether the caller asked for a stream.
        deadline: the caller's deadline (RFC 3339) or ``None``.
        cancelled: a threading.Event set when the caller cancels (or the
            handler closes); long-running work should check it.
    """

    def __init__(self, client: Client, raw: Dict[str, Any]):
        self.client = client
        self.raw = raw
        self.id = raw["id"]  # type: str
        self.name = raw.get("name", "")  # type: str
        self.caller = raw.get("from", "")  # type: str
        self.input = raw.get("input")  # type: Any
        self.meta = raw.get("meta") or {}  # type: Dict[str, str]
        self.stream = bool(raw.get("stream"))
        self.deadline = raw.get("deadline")  # type: Optional[str]
        self.cancelled = threading.Event()

    def __repr__(self) -> str:
        return "weft.Call(%s %s from %s)" % (self.id, self.name, self.caller)

    def invoke(self, peer: str, name: str, input: Any = None, **kw: Any) -> Any:
        """Makes a call on behalf of this one (it inherits its trace and session)."""
        return self.client.invoke(peer, name, input, parent=self.id, **kw)

    def invoke_stream(self, peer: str, name: str, input: Any = None, **kw: Any) -> Stream:
        """Makes a stream call on behalf of this one."""
        return self.client.invoke_stream(peer, name, input, parent=self.id, **kw)


def _is_generator(v: Any) -> bool:
    """Whether a handler returned a generator (deltas) rather than a value."""
    return isinstance(v, types.GeneratorType)


def _error_body(e: BaseException) -> Dict[str, Any]:
    """The error answer for an exception a handler raised."""
    code = e.code if isinstance(e, WeftError) and e.code else "handler_failed"
    msg = e.message if isinstance(e, WeftError) else str(e)
    return {"code": code, "message": msg or type(e).__name__}


def _final(result: Any) -> Dict[str, Any]:
    """The final answer for a handler's result (a value or a Reply)."""
    if isinstance(result, Reply):
        out = {"output": result.output}  # type: Dict[str, Any]
        if result.meta:
            out["meta"] = result.meta
        return out
    return {"output": result}


class Handler:
    """Serves calls for some names on one daemon (see :meth:`Client.handle`).

    The registration is a long-lived NDJSON stream of ``call`` and
    ``cancel`` events; a reader thread dispatches calls to a pool of
    worker threads and answers each with ``POST /v1/calls/{id}/reply``, or
    for a stream call with the frames of ``POST /v1/calls/{id}/frames``
    (a chunked NDJSON upload produced as the generator yields).

    Use it as a context manager, or call :meth:`close`. :meth:`wait`
    blocks until the daemon ends the stream; ``error`` then says why.
    """

    def __init__(self, client: Client, names: List[str], fn: Callable[[Call], Any], concurrency: int,
                 capabilities: Optional[Sequence[Union[str, Dict[str, Any]]]], allow: List[str]):
        self.names = names
        self.error = None  # type: Optional[BaseException]
        self._client = client
        self._fn = fn
        self._lock = threading.Lock()
        self._calls = {}  # type: Dict[str, Call]
        self._closing = False
        self._done = threading.Event()
        body = {"names": names, "concurrency": concurrency}  # type: Dict[str, Any]
        if capabilities:
            body["capabilities"] = _capabilities(capabilities)
        if allow:
            body["allow"] = allow
        self._stream = client._stream("POST", "/v1/handlers", self._events, body=body,
                                      headers={"Accept": "application/x-ndjson"})
        first = next(self._stream, None)
        if first is None or first.get("type") != "ready":
            self._stream.close()
            raise WeftError(None, "stream_closed", "the daemon did not confirm the handler registration")
        self.allow = first.get("allow", [])  # type: List[str]
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="weft-call")
        self._reader = threading.Thread(target=self._run, name="weft-handler", daemon=True)
        self._reader.start()

    @staticmethod
    def _events(stream: Stream, resp: http.client.HTTPResponse) -> Iterator[Dict[str, Any]]:
        """Parses the handler stream's NDJSON events."""
        for line in _lines(resp):
            if line.strip():
                yield json.loads(line)
        raise WeftError(None, "stream_closed", "the daemon closed the handler stream")

    def _run(self) -> None:
        """Reads events until the stream ends, dispatching calls and cancels."""
        try:
            for ev in self._stream:
                kind = ev.get("type")
                if kind == "call" and ev.get("call"):
                    call = Call(self._client, ev["call"])
                    with self._lock:
                        self._calls[call.id] = call
                    self._pool.submit(self._serve, call)
                elif kind == "cancel":
                    with self._lock:
                        call = self._calls.get(ev.get("id", ""))
                    if call is not None:
                        call.cancelled.set()
        except BaseException as e:  # noqa: B036 - recorded for wait()/serve_forever()
            if not self._closing:
                self.error = e
        finally:
            with self._lock:  # the daemon fails calls whose handler went away
                for call in self._calls.values():
                    call.cancelled.set()
            self._done.set()

    def _serve(self, call: Call) -> None:
        """Runs fn for one call and sends its answer."""
        try:
            if call.stream:
                self._serve_stream(call)
            else:
                self._serve_unary(call)
        except Exception:
            # A call the caller gave up on fails to be answered; its cancel
            # event may still be on its way.
            if not call.cancelled.wait(1.0):
                _log.exception("weft: answering call %s (%s)", call.id, call.name)
        finally:
            with self._lock:
                self._calls.pop(call.id, None)

    def _serve_unary(self, call: Call) -> None:
        """Answers a unary call with one reply."""
        try:
            result = self._fn(call)
            if _is_generator(result):
                result = self._drain(call, result)
            body = _final(result)
            _dumps(body)  # fail here, as the handler, if the output is not JSON
        except Exception as e:
            body = {"error": _error_body(e)}
        path = "/v1/calls/%s/reply" % _q(call.id)
        try:
            self._client.request("POST", path, body)
        except WeftError as e:
            if e.code in ("cancelled", "unknown_call"):
                return  # the call ended first: nobody waits for this answer
            # The answer was refused (too large): fail the call rather than
            # leave the caller waiting for its deadline.
            fail = {"error": {"code": "handler_failed", "message": "the handler's answer was refused: %s" % e.message}}
            try:
                self._client.request("POST", path, fail)
            except WeftError:
                pass

    @staticmethod
    def _drain(call: Call, gen: Iterator[Any]) -> Any:
        """Runs a generator for a unary call: its return value, else the list of what it yielded."""
        items = []
        try:
            while not call.cancelled.is_set():
                try:
                    items.append(next(gen))
                except StopIteration as stop:
                    return stop.value if stop.value is not None else items
        finally:
            gen.close()  # type: ignore[attr-defined]
        return items

    def _serve_stream(self, call: Call) -> None:
        """Answers a stream call with frames, produced as fn yields them."""
        try:
            result = self._fn(call)
        except Exception as e:
            result = _Failed(e)
        frames = self._frames(call, result)
        try:
            self._client.request("POST", "/v1/calls/%s/frames" % _q(call.id), frames,
                                 headers={"Content-Type": "application/x-ndjson"}, timeout=None)
        except WeftError as e:
            if e.code not in ("cancelled", "unknown_call") and not call.cancelled.is_set():
                raise
        except OSError:
            # The daemon stops reading once the caller is gone.
            if not call.cancelled.is_set():
                raise
        finally:
            frames.close()

    @staticmethod
    def _frames(call: Call, result: Any) -> Iterator[bytes]:
        """The NDJSON frames of a stream call's answer (delta..., final or error)."""

        def line(frame: Dict[str, Any]) -> bytes:
            """One NDJSON line."""
            return _dumps(frame) + b"\n"

        def final(value: Any) -> bytes:
            """The final frame for the handler's result, or an error frame if it is not JSON."""
            try:
                return line(dict(_final(value), kind="final"))
            except (TypeError, ValueError) as e:
                return line({"kind": "error", "error": {"code": "handler_failed", "message": "the output is not JSON: %s" % e}})

        if isinstance(result, _Failed):
            yield line({"kind": "error", "error": _error_body(result.error)})
            return
        if not _is_generator(result):
            yield final(result)
            return
        try:
            while True:
                if call.cancelled.is_set():
                    yield line({"kind": "error", "error": {"code": "cancelled", "message": "the call was cancelled"}})
                    return
                try:
                    item = next(result)
                except StopIteration as stop:
                    yield final(stop.value)
                    return
                except Exception as e:
                    yield line({"kind": "error", "error": _error_body(e)})
                    return
                try:
                    out = line({"kind": "delta", "output": item})
                except (TypeError, ValueError) as e:
                    yield line({"kind": "error", "error": {"code": "handler_failed", "message": "a delta is not JSON: %s" % e}})
                    return
                yield out
        finally:
            result.close()

    @property
    def done(self) -> bool:
        """Whether the handler stream has ended."""
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until the handler stream ends; returns whether it did."""
        return self._done.wait(timeout)

    def serve_forever(self) -> None:
        """Blocks until the handler is closed; raises why the daemon ended it, if it did."""
        self._done.wait()
        if self.error is not None:
            raise self.error

    def close(self, wait: bool = True) -> None:
        """Unregisters: ends the stream, cancels the calls in flight, and (with wait) waits for them."""
        self._closing = True
        self._stream.close()
        with self._lock:
            for call in self._calls.values():
                call.cancelled.set()
        if threading.current_thread() is not self._reader:
            self._reader.join()
        self._pool.shutdown(wait=wait)

    def __enter__(self) -> "Handler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Failed:
    """A handler function that raised before returning a generator."""

    def __init__(self, error: BaseException):
        self.error = error
