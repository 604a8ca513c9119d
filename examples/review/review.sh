#!/bin/sh
# A toy code reviewer for `weft handle` (the README's walkthrough):
#
#   weft handle review --exec ./examples/review/review.sh
#   weft invoke PEER review --data '{"pr": 42, "diff": "+ x := 1 // TODO: name it"}'
#
# weft runs it once per call: the call's input JSON on stdin, the result
# JSON on stdout (a non-zero exit fails the call, with stderr as the
# message). The caller and the call are in WEFT_CALLER and WEFT_CALL_ID.
# It reads the whole input and counts the TODO and FIXME marks in it; a real
# reviewer would run a linter or a model here.
set -eu
input=$(cat)
bytes=$(printf '%s' "$input" | wc -c | tr -d ' ')
marks=$(printf '%s' "$input" | grep -o 'TODO\|FIXME' | wc -l | tr -d ' ')
if [ "$marks" -eq 0 ]; then
	verdict=approve
else
	verdict=changes_requested
fi
printf '{"verdict": "%s", "marks": %s, "bytes": %s, "reviewer": "%s"}\n' \
	"$verdict" "$marks" "$bytes" "${WEFT_CALL_NAME:-review}"
