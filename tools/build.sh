#!/usr/bin/env bash
# Build the repository-checking tools (actionlint) from Go modules into a cache OUTSIDE the repo.
#
#   tools/build.sh                  build what is missing (a no-op when cached); prints the bin dir
#   tools/build.sh --print-bin-dir  print the bin dir only (no build)
#
# Env: GPUPOOL_TOOLCHAIN_DIR (default $HOME/.cache/gpupool-toolchain). Versions: tools/versions.env.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"
ROOT="${GPUPOOL_TOOLCHAIN_DIR:-$HOME/.cache/gpupool-toolchain}/tools"
BIN_DIR="$ROOT/actionlint-$ACTIONLINT_VERSION"
case "${1:-}" in
  --print-bin-dir) echo "$BIN_DIR"; exit 0 ;;
esac
if [ ! -x "$BIN_DIR/actionlint" ]; then
  command -v go >/dev/null || { echo "tools/build.sh: 'go' not found on PATH" >&2; exit 2; }
  mkdir -p "$BIN_DIR"
  echo "[tools] go install github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION" >&2
  # GOBIN into the cache; a temporary dir first, so an interrupted build never leaves a half binary.
  tmp="$(mktemp -d "$ROOT/.build.XXXXXX")"
  GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" GOBIN="$tmp" \
    go install -trimpath -ldflags "-s -w -X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION" \
    "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
  mv "$tmp/actionlint" "$BIN_DIR/actionlint"
  rmdir "$tmp"
fi
echo "$BIN_DIR"
