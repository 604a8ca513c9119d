"""Tests of weft.py and agent.py against two real, connected weft daemons.

The Go test next to this file (python_test.go) starts the daemons and runs
``python3 -m unittest -v`` here with these variables set:

    WEFT_TEST_HOME_A, WEFT_TEST_HOME_B   the daemons' homes
    WEFT_TEST_ID_A, WEFT_TEST_ID_B       their peer IDs

Without them the daemon tests are skipped; the tests that need no daemon
(socket resolution, the SSE parser) still run.
"""

from __future__ import annotations

import base64
import itertools
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from typing import Any, Callable, List, Optional
from unittest import mock

import weft

HERE = os.path.dirname(os.path.abspath(__file__))
WAIT = 30.0  # seconds any one thing may take before a test fails

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def random_peer_id() -> str:
    """A well-formed peer ID (an Ed25519 key's identity multihash) nobody has."""
    key = b"\x08\x01\x12\x20" + os.urandom(32)  # protobuf PublicKey{Type: Ed25519, Data}
    raw = b"\x00" + bytes([len(key)]) + key
    n, s = int.from_bytes(raw, "big"), ""
    while n:
        n, r = divmod(n, 58)
        s = _B58[r] + s
    return "1" * (len(raw) - len(raw.lstrip(b"\0"))) + s


def random_message_id() -> str:
    """A well-formed message ID (base32 of 32 bytes) of no message."""
    return base64.b32encode(os.urandom(32)).decode().rstrip("=").lower()


def unique(prefix: str) -> str:
    """A name no other test uses."""
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def take(stream: weft.Stream, n: int, timeout: float = WAIT,
         keep: Callable[[Any], bool] = lambda _: True) -> List[Any]:
    """Returns the first n items of stream that keep accepts, or fewer if timeout passes first.

    A timer closes the stream at the deadline, which ends the iteration.
    """
    out = []  # type: List[Any]
    timer = threading.Timer(timeout, stream.close)
    timer.start()
    try:
        for item in stream:
            if keep(item):
                out.append(item)
                if len(out) == n:
                    break
    finally:
        timer.cancel()
        stream.close()
    return out


def inbox_end(c: weft.Client) -> str:
    """The cursor after everything now in c's inbox."""
    cur = ""
    while True:
        msgs, nxt = c.inbox(after=cur or None, limit=1000)
        if not msgs:
            return nxt or cur
        cur = nxt


def poll(cond: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Calls cond every 50 ms until it returns something true, and returns that."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %gs waiting for %s" % (timeout, what))
        time.sleep(0.05)


class DaemonTest(unittest.TestCase):
    """A test against the two daemons A and B (skipped without them)."""

    @classmethod
    def setUpClass(cls) -> None:
        """Connects to the daemons named in the environment, or skips."""
        homes = os.environ.get("WEFT_TEST_HOME_A"), os.environ.get("WEFT_TEST_HOME_B")
        if not all(homes):
            raise unittest.SkipTest("no daemons: run through `go test ./examples/python/` (WEFT_TEST_HOME_A/B unset)")
        cls.home_a, cls.home_b = homes
        cls.a = weft.Client(home=cls.home_a, timeout=WAIT)
        cls.b = weft.Client(home=cls.home_b, timeout=WAIT)
        cls.id_a, cls.id_b = os.environ["WEFT_TEST_ID_A"], os.environ["WEFT_TEST_ID_B"]
        # B's handlers take calls from the peers B trusts (the default): A is one.
        cls.b.trust(cls.id_a, name="a")

    def assertWeftError(self, status: Optional[int], code: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> weft.WeftError:
        """Asserts that fn raises a WeftError with status and code, and returns it."""
        with self.assertRaises(weft.WeftError) as cm:
            fn(*args, **kw)
        self.assertEqual((cm.exception.status, cm.exception.code), (status, code), str(cm.exception))
        return cm.exception

    def handle(self, names: Any, fn: Callable[[weft.Call], Any], **kw: Any) -> weft.Handler:
        """Registers fn on B for the test's duration."""
        h = self.b.handle(names, fn, **kw)
        self.addCleanup(h.close)
        return h


class SocketTest(unittest.TestCase):
    """Finding the socket, and a daemon that is not there."""

    def test_socket_resolution(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            cases = [
                ("explicit socket wins", dict(socket_path="/x/s.sock", home="/h"), {"WEFT_HOME": "/e"}, "/x/s.sock"),
                ("home", dict(home="/h"), {"WEFT_HOME": "/e"}, "/h/weft.sock"),
                ("$WEFT_HOME", {}, {"WEFT_HOME": "/e"}, "/e/weft.sock"),
                ("~/.weft", {}, {"HOME": d}, os.path.join(d, ".weft", "weft.sock")),
            ]
            for name, kw, env, want in cases:
                with self.subTest(name), mock.patch.dict(os.environ, env):
                    if "WEFT_HOME" not in env:
                        os.environ.pop("WEFT_HOME", None)
                    self.assertEqual(weft.Client(**kw).socket_path, want)

    def test_no_daemon(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            stale = os.path.join(d, "stale.sock")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(stale)  # the file exists, but nobody listens
            s.close()
            for name, client in [("missing", weft.Client(home=d)), ("stale", weft.Client(socket_path=stale))]:
                with self.subTest(name):
                    with self.assertRaises(weft.DaemonNotRunning) as cm:
                        client.node()
                    e = cm.exception
                    self.assertIsInstance(e, weft.WeftError)
                    self.assertIsInstance(e, ConnectionError)
                    self.assertEqual(e.code, "not_running")
                    self.assertIn("daemon not running (no socket at %s)" % client.socket_path, str(e))
                    self.assertRaises(weft.DaemonNotRunning, client.follow, "x")


class SSEParserTest(unittest.TestCase):
    """parse_sse follows the EventSource rules."""

    def test_parse(self) -> None:
        cases = [
            ("one event", [b"id: 1\n", b"event: message\n", b"data: {}\n", b"\n"], [("message", "{}", "1")]),
            ("multi-line data", [b"data: a\n", b"data:b\n", b"data:  c\n", b"\n"], [("message", "a\nb\n c", None)]),
            ("comments and CRLF", [b": keep-alive\r\n", b"\r\n", b"data: x\r\n", b"\r\n"], [("message", "x", None)]),
            ("id carries over", [b"id: 7\n", b"data: a\n", b"\n", b"data: b\n", b"\n"], [("message", "a", "7"), ("message", "b", "7")]),
            ("no data, no event", [b"event: ping\n", b"\n", b"id: 3\n", b"\n"], []),
            ("unfinished event dropped", [b"data: a\n", b"\n", b"data: b\n"], [("message", "a", None)]),
            ("named event, unknown field", [b"event: error\n", b"retry: 5\n", b"data: \"x\"\n", b"\n"], [("error", '"x"', None)]),
            ("field without colon: empty data", [b"data\n", b"\n"], [("message", "", None)]),
            ("utf-8", ["data: {\"t\": \"\u00fc\u4e16\"}\n".encode(), b"\n"], [("message", "{\"t\": \"\u00fc\u4e16\"}", None)]),
        ]
        for name, lines, want in cases:
            with self.subTest(name):
                self.assertEqual(list(weft.parse_sse(lines)), want)


class SpaceTest(DaemonTest):
    """Spaces across the two daemons."""

    def test_node_and_peers(self) -> None:
        self.assertEqual(self.a.node()["id"], self.id_a)
        self.assertEqual(self.b.node()["id"], self.id_b)
        poll(lambda: any(p["id"] == self.id_b for p in self.a.peers()), "A connected to B")

    def test_private_space(self) -> None:
        name = unique("py private")
        sp = self.a.create(name)
        self.assertTrue(sp["private"])
        self.assertWeftError(422, "bad_invite", self.b.join_invite, "weft-invite1.nope")
        token = self.a.invite(name, peer=self.id_b, expires="1h")
        joined = self.b.join_invite(token)
        self.assertEqual(joined["id"], sp["id"])
        roles = {m["peer"]: m["role"] for m in self.b.members(sp["id"])}
        self.assertEqual(roles, {self.id_a: "owner", self.id_b: "member"})
        sent = self.b.send(name, {"text": "from python"})
        poll(lambda: any(m["id"] == sent["id"] for m in self.a.read(sp["id"])[0]), "B's message on A")
        self.a.remove(name, self.id_b)
        poll(lambda: self.id_b not in {m["peer"] for m in self.b.members(name)}, "B to learn of its removal")
        self.assertWeftError(403, "not_member", self.b.send, name, {"text": "after"})

    def test_sealed_space(self) -> None:
        name = unique("py sealed")
        sp = self.a.create(name, sealed=True)
        self.assertTrue(sp["private"] and sp["sealed"])
        self.b.join_invite(self.a.invite(name, peer=self.id_b, expires="1h"))
        sent = self.b.send(name, {"text": "sealed from python"}, meta={"k": "v"})
        self.assertEqual(sent["content"], {"text": "sealed from python"})
        poll(lambda: any(m["id"] == sent["id"] and m["content"] == {"text": "sealed from python"}
                         and m["meta"] == {"k": "v"} for m in self.a.read(sp["id"])[0]),
             "B's sealed message on A, in clear")

    def test_join_send_read_follow(self) -> None:
        space = unique("py test ?#%& \u00fc")  # every character here needs escaping in a path
        joined = self.a.join(space)
        self.assertEqual(joined["name"], space)
        self.assertEqual(self.a.join(space)["id"], joined["id"], "joining twice is fine")
        self.b.join(space)
        self.assertIn(space, [s["name"] for s in self.b.spaces()])
        self.assertEqual(self.b.space(joined["id"])["name"], space, "a space by ID")

        live = self.b.follow(space)  # opened before anything is sent: replay is empty, then live
        first = self.a.send(space, {"text": "hello <&> \u4e16\u754c", "n": 1}, type="greeting",
                            meta={"session": "s1"}, ttl=3600)
        second = self.a.send(space, "plain text", reply_to=first["id"], to=self.id_b)
        third = self.a.send(space, {"n": 3}, refs={"messages": [first["id"], second["id"]]})
        sent = [first["id"], second["id"], third["id"]]

        got = take(live, 3)
        self.assertEqual([m["id"] for m in got], sent, "B sees A's messages in A's order")
        m0, m1, m2 = got
        self.assertEqual(m0["from"], self.id_a)
        self.assertEqual(m0["content"], {"text": "hello <&> \u4e16\u754c", "n": 1})
        self.assertEqual((m0["type"], m0["meta"], m0["ttl"]), ("greeting", {"session": "s1"}, 3600))
        self.assertEqual(m1["content"], {"text": "plain text"})
        self.assertEqual(m1["type"], "text")
        self.assertEqual(m1["refs"], {"messages": [first["id"]], "nodes": [self.id_b]})
        self.assertEqual(m2["refs"], {"messages": [first["id"], second["id"]]})
        self.assertTrue(all(m["cursor"] for m in got))
        self.assertEqual(live.cursor, m2["cursor"])

        # Pages, in the same order, with a cursor that stays put at the end.
        page1, cur = self.b.read(space, limit=2)
        page2, cur2 = self.b.read(space, after=cur, limit=2)
        page3, cur3 = self.b.read(space, after=cur2)
        self.assertEqual([m["id"] for m in page1 + page2], sent)
        self.assertEqual((page3, cur3), ([], cur2))

        # Resuming a follow from a cursor replays only what came after it.
        resumed = take(self.b.follow(space, after=m0["cursor"]), 2)
        self.assertEqual([m["id"] for m in resumed], sent[1:])

        # A message B sends reaches A's live follow too.
        mine = self.b.send(space, {"from": "b"})
        self.assertEqual([m["id"] for m in take(self.a.follow(space, after=m2["cursor"]), 1, keep=lambda m: m["from"] == self.id_b)],
                         [mine["id"]])

        thread = self.b.thread(third["id"])
        self.assertEqual({m["id"] for m in thread["messages"]}, set(sent))

        self.b.leave(space)
        self.assertNotIn(space, [s["name"] for s in self.b.spaces()])

    def test_close_follow_from_another_thread(self) -> None:
        space = unique("quiet")
        self.a.join(space)
        first = self.a.send(space, {"n": 1})
        stream = self.a.follow(space)
        got, ended = [], threading.Event()  # type: List[Any], threading.Event

        def read() -> None:
            for m in stream:  # blocks once the one message is read
                got.append(m["id"])
            ended.set()  # a close ends the loop without an exception

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        poll(lambda: got, "the replayed message")
        self.assertFalse(ended.is_set(), "the stream waits for more")
        stream.close()
        self.assertTrue(ended.wait(WAIT), "close() ends a blocked iteration")
        reader.join(WAIT)
        self.assertEqual(got, [first["id"]])
        self.assertTrue(stream.closed)
        self.assertEqual(list(stream), [], "a closed stream yields nothing")

    def test_api_errors(self) -> None:
        space = unique("errors")
        self.a.join(space)
        cases = [
            ("send to an unknown space", 404, "unknown_space", lambda: self.a.send(unique("nowhere"), {"x": 1})),
            ("read an unknown space", 404, "unknown_space", lambda: self.a.read(unique("nowhere"))),
            ("follow an unknown space", 404, "unknown_space", lambda: self.a.follow(unique("nowhere"))),
            ("malformed JSON", 400, "bad_request", lambda: self.a.request("POST", "/v1/spaces", b"{not json")),
            ("malformed JSON send", 400, "bad_request",
             lambda: self.a.request("POST", "/v1/spaces/%s/messages" % space, b'{"content": {"a": }')),
            ("content not an object", 422, "malformed", lambda: self.a.send(space, [1, 2])),
            ("bad cursor", 400, "bad_cursor", lambda: self.a.read(space, after="not a cursor")),
            ("bad ref", 422, "invalid", lambda: self.a.send(space, {"x": 1}, reply_to="nope")),
            ("bad space name", 400, "bad_request", lambda: self.a.join("a/b")),
            ("unknown route", 404, "not_found", lambda: self.a.request("GET", "/v1/nothing")),
            ("unknown message", 404, "not_found", lambda: self.a.message(random_message_id())),
            ("bad multiaddr", 400, "bad_multiaddr", lambda: self.a.connect("not an addr")),
        ]
        for name, status, code, fn in cases:
            with self.subTest(name):
                self.assertWeftError(status, code, fn)


class DirectTest(DaemonTest):
    """Direct messages and inboxes."""

    def test_dm_request_response(self) -> None:
        a_end, b_end = inbox_end(self.a), inbox_end(self.b)
        a_inbox = self.a.follow_inbox(after=a_end)
        req = self.a.dm(self.id_b, {"q": "review PR 42?"}, kind="request", meta={"session": "dm1"})
        self.assertEqual(req["status"], "delivered")
        rid = req["message"]["id"]
        self.assertTrue(req["message"]["meta"].get("correlation"), "a request gets a correlation ID")

        msgs, _ = self.b.inbox(after=b_end)  # delivered = stored in B's inbox
        self.assertEqual([m["id"] for m in msgs], [rid])
        got = take(self.b.follow_inbox(after=b_end), 1)
        self.assertEqual(len(got), 1)
        self.assertEqual((got[0]["id"], got[0]["type"], got[0]["from"], got[0]["content"]),
                         (rid, "request", self.id_a, {"q": "review PR 42?"}))

        resp = self.b.dm(self.id_a, "looks good", kind="response", reply_to=rid)
        self.assertEqual(resp["status"], "delivered")
        sent, _ = self.b.sent()  # B's sent log has the response it delivered
        mine = [o for o in sent if o["id"] == resp["message"]["id"]]
        self.assertEqual([(o["to"], o["kind"], o["attempts"]) for o in mine], [(self.id_a, "response", 1)])
        self.assertTrue(mine[0]["delivered_at"])
        answers = take(a_inbox, 1)
        self.assertEqual(len(answers), 1, "A's inbox stream got the response")
        ans = answers[0]
        self.assertEqual((ans["type"], ans["content"], ans["refs"]["messages"]), ("response", {"text": "looks good"}, [rid]))
        self.assertEqual(ans["meta"]["correlation"], req["message"]["meta"]["correlation"])
        self.assertEqual(ans["meta"]["session"], "dm1", "the response inherits the request's session")

    def test_dm_errors_and_queue(self) -> None:
        nobody = random_peer_id()
        queued = self.a.dm(nobody, {"x": 1}, ttl=120)
        self.assertEqual(queued["status"], "queued")
        self.assertIn(queued["message"]["id"], [o["id"] for o in self.a.outbox(to=nobody)])
        cases = [
            ("not a peer", 400, "bad_peer", lambda: self.a.dm("nope", {"x": 1})),
            ("to self", 400, "bad_peer", lambda: self.a.dm(self.id_a, {"x": 1})),
            ("bad kind", 422, "invalid", lambda: self.a.dm(self.id_b, {"x": 1}, kind="shout")),
            ("content not an object", 422, "malformed", lambda: self.a.dm(self.id_b, 5)),
        ]
        for name, status, code, fn in cases:
            with self.subTest(name):
                self.assertWeftError(status, code, fn)


class CallTest(DaemonTest):
    """Calls from A to handlers served on B with Client.handle."""

    def test_unary(self) -> None:
        name = unique("echo")
        seen = queue.Queue()  # type: queue.Queue
        self.handle(name, lambda call: (seen.put(call), {"echo": call.input, "name": call.name})[1])
        res = self.a.invoke_full(self.id_b, name, {"x": [1, "\u00fc"]}, meta={"session": "s9", "local.tag": "mine"})
        self.assertEqual(res["output"], {"echo": {"x": [1, "\u00fc"]}, "name": name})
        self.assertEqual(res["meta"]["session"], "s9", "meta flows back into the answer")
        self.assertEqual(res["meta"]["local.tag"], "mine", "local meta comes back to the caller")
        call = seen.get(timeout=WAIT)
        self.assertEqual((call.caller, call.stream, call.meta["session"]), (self.id_a, False, "s9"))
        self.assertNotIn("local.tag", call.meta, "local meta never leaves the caller's daemon")
        self.assertRegex(call.meta["traceparent"], r"^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$")
        self.assertEqual(self.a.invoke(self.id_b, name), {"echo": None, "name": name}, "no input")
        with self.subTest("Reply with meta"):
            rname = unique("reply")
            self.handle(rname, lambda call: weft.Reply({"ok": True}, meta={"session": "changed", "x-extra": "1"}))
            res = self.a.invoke_full(self.id_b, rname)
            self.assertEqual(res["output"], {"ok": True})
            self.assertEqual(res["meta"]["x-extra"], "1")

    def test_stream(self) -> None:
        name = unique("count")

        def count(call: weft.Call) -> Any:
            def gen() -> Any:
                for i in range(call.input["n"]):
                    yield {"i": i}
                return {"total": call.input["n"]}
            return gen()

        self.handle(name, count)
        frames = list(self.a.invoke_stream(self.id_b, name, {"n": 5}))
        self.assertEqual([f["kind"] for f in frames], ["started"] + ["delta"] * 5 + ["final"])
        self.assertEqual([f.get("data") for f in frames[1:-1]], [{"i": i} for i in range(5)])
        self.assertEqual(frames[-1]["data"], {"total": 5})
        seqs = [f["seq"] for f in frames]
        self.assertEqual(seqs, sorted(set(seqs)), "seq increases")
        self.assertEqual(self.a.invoke(self.id_b, name, {"n": 3}), {"total": 3},
                         "a unary call to a generator gets its return value")

        many = list(self.a.invoke_stream(self.id_b, name, {"n": 2000}))
        self.assertEqual(len(many), 2002)
        self.assertEqual(many[-2]["data"], {"i": 1999})

    def test_stream_of_plain_handlers(self) -> None:
        plain, listing = unique("plain"), unique("listing")
        self.handle(plain, lambda call: {"stream": call.stream})
        self.handle(listing, lambda call: (x for x in "abc"))  # yields, returns nothing
        frames = list(self.a.invoke_stream(self.id_b, plain))
        self.assertEqual([(f["kind"], f.get("data")) for f in frames], [("started", None), ("final", {"stream": True})])
        self.assertEqual(self.a.invoke(self.id_b, listing), ["a", "b", "c"])
        frames = list(self.a.invoke_stream(self.id_b, listing))
        self.assertEqual([f.get("data") for f in frames], [None, "a", "b", "c", None])

    def test_handler_errors(self) -> None:
        boom, late, coded, bad = unique("boom"), unique("late"), unique("coded"), unique("notjson")

        def raise_value(call: weft.Call) -> Any:
            raise ValueError("boom: %s" % call.input)

        def fail_late(call: weft.Call) -> Any:
            yield {"step": 1}
            yield {"step": 2}
            raise RuntimeError("failed after two steps")

        def raise_coded(call: weft.Call) -> Any:
            raise weft.WeftError(None, "bad_input", "want a number")

        self.handle(boom, raise_value)
        self.handle(late, fail_late)
        self.handle(coded, raise_coded)
        self.handle(bad, lambda call: {"not json": object()})

        e = self.assertWeftError(502, "handler_failed", self.a.invoke, self.id_b, boom, 7)
        self.assertIn("boom: 7", e.message)
        e = self.assertWeftError(502, "handler_failed", lambda: list(self.a.invoke_stream(self.id_b, boom)))
        self.assertIn("boom: None", e.message)
        self.assertWeftError(502, "bad_input", self.a.invoke, self.id_b, coded)
        self.assertWeftError(502, "handler_failed", self.a.invoke, self.id_b, bad)

        got = []  # type: List[Any]
        with self.assertRaises(weft.WeftError) as cm:
            for f in self.a.invoke_stream(self.id_b, late):
                got.append(f.get("data"))
        self.assertEqual((cm.exception.code, cm.exception.message), ("handler_failed", "failed after two steps"))
        self.assertEqual(got, [None, {"step": 1}, {"step": 2}], "the deltas before the failure arrive")

    def test_cancel_stream(self) -> None:
        name = unique("endless")
        calls = queue.Queue()  # type: queue.Queue
        closed = threading.Event()

        def endless(call: weft.Call) -> Any:
            calls.put(call)
            try:
                for i in itertools.count():
                    yield {"i": i}
            finally:
                closed.set()

        self.handle(name, endless)
        stream = self.a.invoke_stream(self.id_b, name)
        deltas = 0
        for f in stream:
            deltas += f["kind"] == "delta"
            if deltas == 5:
                break
        stream.close()
        call = calls.get(timeout=WAIT)
        self.assertTrue(call.cancelled.wait(WAIT), "the handler got the cancel event")
        self.assertTrue(closed.wait(WAIT), "the handler's generator was closed")

    def test_deadline(self) -> None:
        name = unique("slow")
        calls = queue.Queue()  # type: queue.Queue

        def slow(call: weft.Call) -> Any:
            calls.put(call)
            call.cancelled.wait(WAIT)
            return "too late"

        self.handle(name, slow)
        self.assertWeftError(504, "deadline_exceeded", self.a.invoke, self.id_b, name, timeout=3)
        self.assertTrue(calls.get(timeout=WAIT).cancelled.wait(WAIT), "the handler is told the call is over")

    def test_call_errors(self) -> None:
        cases = [
            ("no handler", 404, "no_handler", lambda: self.a.invoke(self.id_b, unique("nobody"))),
            ("no handler, stream", 404, "no_handler", lambda: self.a.invoke_stream(self.id_b, unique("nobody"))),
            ("unknown peer", 503, "unreachable", lambda: self.a.invoke(random_peer_id(), "echo")),
            ("not a peer", 400, "bad_peer", lambda: self.a.invoke("nope", "echo")),
            ("bad name", 400, "bad_request", lambda: self.a.invoke(self.id_b, "no spaces")),
            ("bad handler name", 400, "bad_request", lambda: self.b.handle("no spaces", lambda c: None)),
            ("unknown call", 404, "unknown_call", lambda: self.b.request("POST", "/v1/calls/nope/reply", {"output": 1})),
        ]
        for name, status, code, fn in cases:
            with self.subTest(name):
                self.assertWeftError(status, code, fn)

    def test_concurrent_calls(self) -> None:
        name = unique("together")
        barrier = threading.Barrier(3, timeout=WAIT)  # passes only if three calls run at once
        self.handle(name, lambda call: barrier.wait() >= 0, concurrency=3)
        results = queue.Queue()  # type: queue.Queue
        threads = [threading.Thread(target=lambda: results.put(self.a.invoke(self.id_b, name))) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        self.assertEqual([results.get_nowait() for _ in range(3)], [True] * 3)

    def test_nested_call_inherits_trace(self) -> None:
        inner, outer = unique("inner"), unique("outer")
        h = self.a.handle(inner, lambda call: call.meta, allow=self.id_b)  # served on A, called by B's handler
        self.addCleanup(h.close)
        self.handle(outer, lambda call: {"mine": call.meta, "inner": call.invoke(self.id_a, inner)})
        out = self.a.invoke(self.id_b, outer, meta={"session": "nest"})
        trace = lambda m: m["traceparent"].split("-")[1]  # noqa: E731
        self.assertEqual(trace(out["inner"]), trace(out["mine"]), "the nested call continues the trace")
        self.assertNotEqual(out["inner"]["traceparent"], out["mine"]["traceparent"], "as a child span")
        self.assertEqual(out["inner"]["session"], "nest")

    def test_close_unregisters(self) -> None:
        name = unique("brief")
        h = self.b.handle(name, lambda call: "here")
        self.assertEqual(self.a.invoke(self.id_b, name), "here")
        h.close()
        self.assertTrue(h.done)

        def gone() -> bool:
            try:
                self.a.invoke(self.id_b, name)
            except weft.WeftError as e:
                return e.code == "no_handler"
            return False

        poll(gone, "the handler to be unregistered")


class PolicyTest(DaemonTest):
    """Who may call a handler: the trust list and each handler's allow."""

    def test_trust_list(self) -> None:
        entry = self.a.trust(self.id_b, name="bee")
        self.assertEqual((entry["peer"], entry["name"]), (self.id_b, "bee"))
        self.assertEqual(self.a.trust(self.id_b, name="b")["name"], "b", "trusting again renames")
        self.assertIn((self.id_b, "b"), [(t["peer"], t["name"]) for t in self.a.trusted()])
        self.assertTrue(self.a.untrust(self.id_b))
        self.assertFalse(self.a.untrust(self.id_b), "untrusting a peer not trusted is no error")
        self.assertNotIn(self.id_b, [t["peer"] for t in self.a.trusted()])
        self.assertWeftError(400, "bad_peer", self.a.trust, "not-a-peer")

    def test_stranger(self) -> None:
        self.assertTrue(self.b.untrust(self.id_a))
        self.addCleanup(self.b.trust, self.id_a, "a")
        ran = []  # type: List[str]
        closed, open_, listed = unique("closed"), unique("open"), unique("listed")
        h = self.handle(closed, lambda call: ran.append(call.name))
        self.assertEqual(h.allow, ["trusted"])
        self.assertWeftError(403, "forbidden", self.a.invoke, self.id_b, closed)
        self.assertWeftError(403, "forbidden", self.a.invoke_stream, self.id_b, closed)
        self.assertEqual(ran, [], "a stranger's call reached the handler")
        self.assertEqual(self.handle(open_, lambda call: "open", allow="anyone").allow, ["anyone"])
        self.assertEqual(self.a.invoke(self.id_b, open_), "open")
        self.handle(listed, lambda call: "listed", allow=[self.id_a])
        self.assertEqual(self.a.invoke(self.id_b, listed), "listed")
        access = {c["name"]: c.get("access") for c in self.b.card()["capabilities"]}
        self.assertEqual((access[closed], access[open_], access[listed]), ("restricted", "anyone", "restricted"))
        self.assertWeftError(400, "bad_request", self.b.handle, unique("x"), lambda call: None, allow="everyone")
        self.b.trust(self.id_a)
        self.a.invoke(self.id_b, closed)
        self.assertEqual(ran, [closed], "a trusted peer's call runs")


class CardTest(DaemonTest):
    """Agent cards and discovery."""

    def test_card_and_discover(self) -> None:
        # A's card, looked up from B. B caches the cards it fetches for a
        # minute and discovery filters providers by the cached card, so the
        # capability's name is fixed: a rerun against the same daemons
        # within the minute still finds it.
        cap = "py-test-cap"
        card = self.a.set_card(name="ay", description="the A side", capabilities=[cap, {"name": unique("other"), "description": "d"}])
        self.assertEqual((card["name"], card["description"]), ("ay", "the A side"))
        self.assertIn(cap, [c["name"] for c in card["capabilities"]])
        self.assertEqual(self.a.card()["name"], "ay")
        self.assertEqual(self.b.peer_card(self.id_a)["name"], "ay")
        self.assertEqual(self.b.health(self.id_a)["status"], "ok")
        found = poll(lambda: self.b.discover(cap, timeout=5), "B to discover " + cap)
        self.assertEqual([p["card"]["id"] for p in found], [self.id_a])
        self.assertEqual(self.b.discover(unique("nothing"), timeout=0.5), [])


class AgentTest(DaemonTest):
    """agent.py as a process on B, used from A."""

    TEXT = ("Weft has no central server. Every daemon keeps the history of its spaces. "
            "Agents call each other directly over the mesh.\nThe history of a space is repaired by sync.")

    def start_agent(self, space: str) -> "tuple[subprocess.Popen, queue.Queue]":
        """Starts agent.py on B; returns the process and a queue of its stdout lines."""
        env = dict(os.environ, WEFT_HOME=self.home_b, PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "agent.py"), "--space", space, "--name", "py-agent-test"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        lines = queue.Queue()  # type: queue.Queue

        def read() -> None:
            for line in proc.stdout:
                lines.put(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def stop() -> None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            reader.join(WAIT)  # the pipe is at its end once the agent is gone
            proc.stdout.close()
            proc.stderr.close()

        self.addCleanup(stop)
        return proc, lines

    def wait_line(self, proc: subprocess.Popen, lines: queue.Queue, pattern: str) -> str:
        """Waits for a stdout line matching pattern."""
        deadline = time.monotonic() + WAIT
        while True:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                self.fail("agent printed no %r (exit %s)" % (pattern, proc.poll()))
            if re.search(pattern, line):
                return line

    def test_agent(self) -> None:
        space = unique("py-agents")
        self.a.join(space)
        proc, lines = self.start_agent(space)
        self.assertEqual(self.wait_line(proc, lines, r"^ready ").split()[1], self.id_b)

        with self.subTest("announced"):
            hello = take(self.a.follow(space), 1, keep=lambda m: m["type"] == "team.hello")
            self.assertEqual(len(hello), 1)
            self.assertEqual((hello[0]["from"], hello[0]["content"]["name"]), (self.id_b, "py-agent-test"))
            self.assertEqual(hello[0]["content"]["capabilities"], ["word_count", "summarize"])

        with self.subTest("word_count"):
            self.assertEqual(self.a.invoke(self.id_b, "word_count", {"text": self.TEXT}),
                             {"words": len(self.TEXT.split()), "lines": 2, "chars": len(self.TEXT)})
            frames = list(self.a.invoke_stream(self.id_b, "word_count", {"text": self.TEXT}))
            self.assertEqual([f.get("data") for f in frames[1:-1]], [{"line": 1, "words": 21}, {"line": 2, "words": 9}])
            self.assertEqual(frames[-1]["data"]["words"], 30)

        with self.subTest("summarize"):
            out = self.a.invoke(self.id_b, "summarize", {"text": self.TEXT, "sentences": 1})
            self.assertEqual(out["sentences"], 1)
            self.assertIn(out["summary"], self.TEXT)
            frames = list(self.a.invoke_stream(self.id_b, "summarize", {"text": self.TEXT}))
            deltas = [f["data"]["sentence"] for f in frames if f["kind"] == "delta"]
            self.assertEqual(len(deltas), 2)
            self.assertEqual(frames[-1]["data"]["summary"], " ".join(deltas))
            self.assertWeftError(502, "handler_failed", self.a.invoke, self.id_b, "summarize", {"text": 5})

        with self.subTest("card"):
            card = self.a.peer_card(self.id_b)
            self.assertEqual(card["name"], "py-agent-test")
            self.assertTrue({"word_count", "summarize"} <= {c["name"] for c in card["capabilities"]})

        with self.subTest("request DMs"):
            inbox = self.a.follow_inbox(after=inbox_end(self.a))
            good = self.a.dm(self.id_b, {"task": "word_count", "text": "one two three"}, kind="request")["message"]
            bad = self.a.dm(self.id_b, {"task": "dance", "text": "x"}, kind="request")["message"]
            answers = {m["refs"]["messages"][0]: m for m in take(inbox, 2, keep=lambda m: m["from"] == self.id_b)}
            self.assertEqual(set(answers), {good["id"], bad["id"]})
            self.assertEqual((answers[good["id"]]["type"], answers[good["id"]]["content"]["words"]), ("response", 3))
            self.assertEqual(answers[good["id"]]["meta"]["correlation"], good["meta"]["correlation"])
            self.assertEqual(answers[bad["id"]]["type"], "error")
            self.assertIn("unknown task", answers[bad["id"]]["content"]["error"])

        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(WAIT), 0, proc.stderr.read())
        self.wait_line(proc, lines, r"^bye$")

    def test_agent_sigint(self) -> None:
        proc, lines = self.start_agent(unique("py-agents"))
        self.wait_line(proc, lines, r"^ready ")
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(WAIT), 0, proc.stderr.read())
        self.wait_line(proc, lines, r"^bye$")


if __name__ == "__main__":
    unittest.main()
