#!/usr/bin/env python3
"""An example weft agent in Python, built on weft.py (standard library only).

It joins a space and announces itself there (a ``team.hello`` message),
serves two calls, each both unary and streamed:

* ``word_count`` {"text"} -> {"words", "lines", "chars"}; streamed, one
  delta per line ({"line", "words"}) before the totals;
* ``summarize`` {"text", "sentences"?} -> {"summary", "sentences"}: the
  sentences with the most frequent words, in their order; streamed, one
  delta per chosen sentence;

and answers direct messages of kind ``request`` ({"task": "word_count" or
"summarize", "text": ...}) with a ``response`` DM that has ``reply_to`` set
(so it carries the request's correlation), or an ``error`` DM.

Run it against a running daemon::

    WEFT_HOME=~/.weft python3 examples/python/agent.py --space agents --name counter

Its handlers take calls from the peers the daemon trusts (``weft trust add
PEER``); ``--allow PEER`` (repeatable) or ``--allow anyone`` opens them to
more.

It prints ``ready <peer id>`` once it serves, and exits cleanly (``bye``)
on SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import collections
import re
import signal
import sys
import threading
from typing import Any, Dict, Iterator, List, Optional

import weft

CAPABILITIES = [
    {"name": "word_count", "description": "counts words, lines and characters of {\"text\"}; streams per-line counts"},
    {"name": "summarize", "description": "extracts the key sentences of {\"text\"}; streams them one by one"},
]


def _text(value: Any) -> str:
    """The text of a call's or message's input: {"text": ...} or a plain string."""
    if isinstance(value, dict):
        value = value.get("text", "")
    if not isinstance(value, str):
        raise ValueError('want {"text": "..."}')
    return value


def count_lines(text: str) -> Iterator[Dict[str, int]]:
    """Yields {"line", "words"} for each line of text."""
    for i, line in enumerate(text.splitlines(), 1):
        yield {"line": i, "words": len(line.split())}


def word_count(text: str) -> Dict[str, int]:
    """Counts the words, lines and characters of text."""
    return {"words": len(text.split()), "lines": len(text.splitlines()), "chars": len(text)}


def key_sentences(text: str, n: int = 2) -> List[str]:
    """Returns the n sentences of text whose words are most frequent overall, in text order."""
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
    words = lambda s: [w for w in re.findall(r"[a-z0-9']+", s.lower()) if len(w) > 3]  # noqa: E731
    freq = collections.Counter(w for s in sentences for w in words(s))
    score = {i: sum(freq[w] for w in words(s)) / (1 + len(words(s))) ** 0.5 for i, s in enumerate(sentences)}
    best = sorted(sorted(score, key=lambda i: -score[i])[:max(1, n)])
    return [sentences[i] for i in best]


def serve(call: weft.Call) -> Any:
    """Serves word_count and summarize: a plain answer, or a generator for a stream call."""
    text = _text(call.input)
    if call.name == "word_count":
        if not call.stream:
            return word_count(text)
        return _stream_count(text)
    sentences = int(call.input.get("sentences", 2)) if isinstance(call.input, dict) else 2
    picked = key_sentences(text, sentences)
    if not call.stream:
        return {"summary": " ".join(picked), "sentences": len(picked)}
    return _stream_summary(call, picked)


def _stream_count(text: str) -> Iterator[Dict[str, int]]:
    """word_count as a stream: one delta per line, then the totals."""
    yield from count_lines(text)
    return word_count(text)


def _stream_summary(call: weft.Call, picked: List[str]) -> Iterator[Dict[str, str]]:
    """summarize as a stream: one delta per sentence, then the summary."""
    for s in picked:
        if call.cancelled.is_set():
            return None
        yield {"sentence": s}
    return {"summary": " ".join(picked), "sentences": len(picked)}


def answer(request: Dict[str, Any]) -> Dict[str, Any]:
    """The content of the response to a request DM; raises ValueError for a bad one."""
    content = request.get("content") or {}
    task = content.get("task", "word_count")
    text = _text(content)
    if task == "word_count":
        return word_count(text)
    if task == "summarize":
        picked = key_sentences(text, int(content.get("sentences", 2)))
        return {"summary": " ".join(picked), "sentences": len(picked)}
    raise ValueError("unknown task %r: want word_count or summarize" % task)


def inbox_end(client: weft.Client) -> str:
    """The cursor after the last message now in the inbox (requests before it are old)."""
    cursor = ""
    while True:
        msgs, nxt = client.inbox(after=cursor or None, limit=1000)
        if not msgs:
            return nxt or cursor
        cursor = nxt


def answer_requests(client: weft.Client, me: str, inbox: weft.Stream, stop: threading.Event) -> None:
    """Answers each request DM in the inbox stream until it is closed."""
    try:
        for msg in inbox:
            if msg.get("type") != "request" or msg.get("from") == me:
                continue
            try:
                reply, kind = answer(msg), "response"
            except (ValueError, TypeError) as e:
                reply, kind = {"error": str(e)}, "error"
            client.dm(msg["from"], reply, kind=kind, reply_to=msg["id"])
            print("answered %s from %s" % (msg["id"], msg["from"]), flush=True)
    except weft.WeftError as e:
        print("inbox: %s" % e, file=sys.stderr, flush=True)
    finally:
        stop.set()


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the agent until SIGINT or SIGTERM; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--space", default="agents", help="the space to join and announce in (default agents)")
    ap.add_argument("--name", default="py-agent", help="this agent's name on its card (default py-agent)")
    ap.add_argument("--socket", help="the daemon's socket (default $WEFT_HOME/weft.sock)")
    ap.add_argument("--allow", action="append", default=[],
                    help="who may call: trusted (the daemon's trusted peers; the default), anyone, or a peer ID (repeatable)")
    args = ap.parse_args(argv)

    stop = threading.Event()
    signalled = []  # type: List[int]

    def on_signal(signum: int, _frame: Any) -> None:
        """Asks the main thread to shut down."""
        signalled.append(signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    client = weft.Client(socket_path=args.socket)
    try:
        me = client.node()["id"]
        client.set_card(name=args.name, description="word counts and summaries, from Python")
        client.join(args.space)
        handler = client.handle(["word_count", "summarize"], serve, concurrency=8, capabilities=CAPABILITIES,
                                allow=args.allow)
        inbox = client.follow_inbox(after=inbox_end(client))
        client.send(args.space, {"name": args.name, "role": "text-tools",
                                 "capabilities": [c["name"] for c in CAPABILITIES]}, type="team.hello")
    except weft.WeftError as e:
        print("agent: %s" % e, file=sys.stderr)
        return 1

    reader = threading.Thread(target=answer_requests, args=(client, me, inbox, stop), daemon=True)
    reader.start()
    threading.Thread(target=lambda: (handler.wait(), stop.set()), daemon=True).start()
    print("ready %s" % me, flush=True)

    stop.wait()
    inbox.close()
    handler.close()
    reader.join(5)
    if not signalled:  # the daemon went away
        print("agent: %s" % (handler.error or "the daemon closed the inbox stream"), file=sys.stderr)
        return 1
    print("bye", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
