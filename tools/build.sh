#!/usr/bin/env bash
# Build the repository-checking tools from Go modules into a cache OUTSIDE the repo:
#   actionlint     checks .github/workflows
#   await-eval     runs the toolchain provider's own await code on one patch apply: what it keeps as outputs
#                  (tools/await-eval; the provider module version is toolchain/versions.env's)
#
#   tools/build.sh                    build what is missing (a no-op when cached); prints the bin dir
#   tools/build.sh --print-bin-dir    print actionlint's bin dir only (no build)
#   tools/build.sh --print-await      print await-eval's path only (no build)
#
# Env: GPUPOOL_TOOLCHAIN_DIR (default $HOME/.cache/gpupool-toolchain). Versions: tools/versions.env.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"
# shellcheck source=../toolchain/versions.env
source "$HERE/../toolchain/versions.env"
ROOT="${GPUPOOL_TOOLCHAIN_DIR:-$HOME/.cache/gpupool-toolchain}/tools"
BIN_DIR="$ROOT/actionlint-$ACTIONLINT_VERSION"
AWAIT_SUM="$(sha256sum < "$HERE/await-eval/main.go" | cut -c1-12)"
AWAIT="$ROOT/await-eval-${PULUMI_K8S_PROVIDER_MODULE_VERSION##*-}-$AWAIT_SUM/await-eval"
case "${1:-}" in
  --print-bin-dir) echo "$BIN_DIR"; exit 0 ;;
  --print-await) echo "$AWAIT"; exit 0 ;;
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
if [ ! -x "$AWAIT" ]; then
  command -v go >/dev/null || { echo "tools/build.sh: 'go' not found on PATH" >&2; exit 2; }
  mod="github.com/pulumi/pulumi-kubernetes/provider/v4@$PULUMI_K8S_PROVIDER_MODULE_VERSION"
  echo "[tools] await-eval against $mod" >&2
  mkdir -p "$ROOT"
  tmp="$(mktemp -d "$ROOT/.build.XXXXXX")"
  # Built inside a copy of the provider module, so its go.mod/go.sum pin every dependency as in the provider.
  src="$(GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod go mod download -json "$mod" \
         | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  mkdir "$tmp/src"; cp -r "$src"/. "$tmp/src"; chmod -R u+w "$tmp/src"
  # Inside pkg/await, so that it may import pkg/await/internal (Go's internal-package rule).
  mkdir -p "$tmp/src/pkg/await/gpupool-await-eval"; cp "$HERE/await-eval/main.go" "$tmp/src/pkg/await/gpupool-await-eval/"
  (cd "$tmp/src" && go mod edit -dropreplace=github.com/pulumi/pulumi-kubernetes/sdk/v4 \
   && GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" \
      go build -trimpath -ldflags "-s -w" -o "$tmp/await-eval" ./pkg/await/gpupool-await-eval)
  mkdir -p "$(dirname "$AWAIT")"; mv "$tmp/await-eval" "$AWAIT"
  rm -rf "$tmp"
fi
echo "$BIN_DIR"
