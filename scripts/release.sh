#!/usr/bin/env bash
# Release build of weft: the weft binary for linux, darwin and windows on
# amd64 and arm64, reproducible (-trimpath, no build ID, no cgo, the commit
# stamped by the go command where it can), each packed with the README and
# the service definitions (packaging/) into an archive, and SHA256SUMS over
# the archives.
#
#   scripts/release.sh [OUT_DIR]        # default dist/
#
# Two runs on the same commit with the same Go give the same bytes: CI
# (.ci/run) builds twice and compares the checksums. Nothing is published.
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-dist}"
version="$(sed -n 's/^const Release = "\(.*\)"$/\1/p' internal/version/version.go)"
[ -n "$version" ] || { echo "release: no Release in internal/version/version.go" >&2; exit 1; }
# Archive timestamps: the commit's time, so that archives are reproducible
# too (SOURCE_DATE_EPOCH, if set, wins).
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"

rm -rf "$out"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# RELEASE_TARGETS (GOOS/GOARCH, space-separated) narrows the set.
for target in ${RELEASE_TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64}; do
	goos="${target%/*}" goarch="${target#*/}"
	name="weft_${version}_${goos}_${goarch}"
	dir="$work/$name"
	mkdir -p "$dir"
	exe=weft
	[ "$goos" = windows ] && exe=weft.exe
	CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" \
		go build -trimpath -buildvcs=auto -ldflags="-s -w -buildid=" -o "$dir/$exe" ./cmd/weft
	cp README.md "$dir/"
	cp -R packaging "$dir/"
	if [ "$goos" = windows ]; then
		(cd "$work" && find "$name" -exec touch -h -d "@$epoch" {} + &&
			find "$name" -type f | LC_ALL=C sort | zip -q -X -@ "$out/$name.zip")
	else
		tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
			-C "$work" -cf - "$name" | gzip -n >"$out/$name.tar.gz"
	fi
done

(cd "$out" && sha256sum -- *.tar.gz *.zip >SHA256SUMS)
cat "$out/SHA256SUMS"
