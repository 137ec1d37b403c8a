#!/usr/bin/env bash
# Build the gpupool toolchain (pulumi CLI, pulumi-language-python, pulumi-resource-kubernetes,
# kube-apiserver, kube-controller-manager, etcd, and gofakes3, an S3-compatible server for the state-backend
# tests) from Go modules into a cache OUTSIDE the repo.
#
#   toolchain/build.sh                  build what is missing; last stdout line = bin dir
#   toolchain/build.sh --print-bin-dir  print the bin dir only (no build); exit 0
#   toolchain/build.sh --check          exit 0 if every binary is present, 1 otherwise (no build)
#   toolchain/build.sh NAME...          build only these (pulumi, pulumi-language-python,
#                                       pulumi-resource-kubernetes, etcd, kube-apiserver,
#                                       kube-controller-manager, gofakes3)
#
# Env: GPUPOOL_TOOLCHAIN_DIR (default $HOME/.cache/gpupool-toolchain), GOFLAGS_P (parallelism,
# default 2). Needs only Go (>= go.mod's go line of each module) and a Go module proxy.
# Versions come from toolchain/versions.env only.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"

ROOT="${GPUPOOL_TOOLCHAIN_DIR:-$HOME/.cache/gpupool-toolchain}"
KEY="pulumi-${PULUMI_VERSION}_k8sprov-${PULUMI_K8S_PROVIDER_VERSION}-${PULUMI_K8S_PROVIDER_MODULE_VERSION##*-}_kube-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}"
BIN_DIR="$ROOT/$KEY/bin"
COMP_DIR="$ROOT/components"    # one dir per (component, version): reused across keys
SRC_DIR="$ROOT/src"            # wrapper modules / writable module copies
LOG_DIR="$ROOT/logs"
ALL=(etcd kube-apiserver kube-controller-manager pulumi pulumi-language-python pulumi-resource-kubernetes gofakes3)
# Files a component installs next to its binary (same component dir, same bin dir).
companions() { case "$1" in pulumi-language-python) echo pulumi-language-python-exec ;; esac; }

case "${1:-}" in
  --print-bin-dir) echo "$BIN_DIR"; exit 0 ;;
  --check)
    for b in "${ALL[@]}"; do
      for f in "$b" $(companions "$b"); do
        [ -x "$BIN_DIR/$f" ] || { echo "missing: $BIN_DIR/$f" >&2; exit 1; }
      done
    done
    echo "$BIN_DIR"; exit 0 ;;
  -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
esac
WANT=("$@"); [ ${#WANT[@]} -gt 0 ] || WANT=("${ALL[@]}")

command -v go >/dev/null || { echo "build.sh: 'go' not found on PATH" >&2; exit 2; }
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false -p=${GOFLAGS_P:-2}"
mkdir -p "$BIN_DIR" "$COMP_DIR" "$SRC_DIR" "$LOG_DIR"
log() { echo "[toolchain] $*" >&2; }
now() { date +%s; }

# one build at a time per cache dir (parallel CI jobs / sessions share it); say so while waiting
if command -v flock >/dev/null; then
  exec 9>>"$ROOT/.build.lock"
  if ! flock -n 9; then
    log "another toolchain build holds $ROOT/.build.lock ($(cat "$ROOT/.build.owner" 2>/dev/null || echo 'owner unknown'));"
    log "waiting for it to finish (up to 60 min; a cold build takes ~25 min), then building what is still missing"
    t_wait=$(now)
    flock -w 3600 9 || { log "timed out waiting for $ROOT/.build.lock"; exit 3; }
    log "got the lock after $(( $(now) - t_wait ))s"
  fi
  echo "pid $$ on $(hostname 2>/dev/null || echo ?), since $(date -u +%FT%TZ)" > "$ROOT/.build.owner"
  trap 'rm -f "$ROOT/.build.owner"' EXIT
fi

# The cold build time of a component on 2 cores, from the table in toolchain/README.md ("" if not listed).
expected_secs() {
  awk -F'|' -v n="$1" '{ split($2, a, " ") } a[1] == n { if (match($3, /[0-9]+/)) print substr($3, RSTART, RLENGTH); exit }' \
    "$HERE/README.md" 2>/dev/null
}

# Run a component's build with its output in LOG, printing a progress line every PROGRESS_SECS (60).
build_logged() { # name out log expected
  build_one "$1" "$2" >"$3" 2>&1 &
  local pid=$! t0 last=0 elapsed
  t0=$(now)
  trap 'kill "$pid" 2>/dev/null' INT TERM
  while kill -0 "$pid" 2>/dev/null; do
    sleep 2
    elapsed=$(( $(now) - t0 ))
    if [ $(( elapsed - last )) -ge "${PROGRESS_SECS:-60}" ]; then
      last=$elapsed
      log "  $1: ${elapsed}s elapsed${4:+ of ~${4}s expected}; $(tail -n 1 "$3" 2>/dev/null | cut -c1-100)"
    fi
  done
  trap - INT TERM
  wait "$pid"
}

# Replace directives of a go.mod that do not point at a local path, as `go mod edit -replace` args.
nonpath_replaces() {
  go mod edit -json "$1" | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    new = r["New"]
    if new["Path"].startswith((".", "/")) or not new.get("Version"):
        continue
    old = r["Old"]["Path"] + ("@" + r["Old"]["Version"] if r["Old"].get("Version") else "")
    print("-replace=%s=%s@%s" % (old, new["Path"], new["Version"]))'
}

# Download a module (quietly) and print its directory in the module cache.
moddir() { go mod download -json "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["Error"]) if d.get("Error") else print(d["Dir"])'; }

new_wrapper() { # dir modulename
  rm -rf "$1"; mkdir -p "$1"
  printf 'module %s\n\ngo %s\n' "$2" "$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1.0/')" > "$1/go.mod"
}

# ---------------------------------------------------------------- components
build_pulumi() { # out
  local v="v$PULUMI_VERSION" w="$SRC_DIR/pulumi-$PULUMI_VERSION" pkg sdk
  pkg="$(moddir "github.com/pulumi/pulumi/pkg/v3@$v")"
  sdk="$(moddir "github.com/pulumi/pulumi/sdk/v3@$v")"
  new_wrapper "$w" gpupool.local/toolchain/pulumi
  (cd "$w"
   # shellcheck disable=SC2046
   go mod edit -require="github.com/pulumi/pulumi/pkg/v3@$v" -require="github.com/pulumi/pulumi/sdk/v3@$v" \
     $( { nonpath_replaces "$pkg/go.mod"; nonpath_replaces "$sdk/go.mod"; } | sort -u)
   go get "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@$v"
   go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$v" \
     -o "$1" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
}

# The Python language host of sdk/v3 <= v3.79.0, where it is still a package of the sdk module (later it
# is a separate module the proxy does not serve). The executor shim it runs is a Python script of the same
# module zip; the host refuses to start unless it sits next to the binary.
build_language_python() { # out
  local v="v$PULUMI_LANGUAGE_PYTHON_VERSION" w="$SRC_DIR/pulumi-language-python-$PULUMI_LANGUAGE_PYTHON_VERSION" sdk
  local p=github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python
  sdk="$(moddir "github.com/pulumi/pulumi/sdk/v3@$v")"
  new_wrapper "$w" gpupool.local/toolchain/pulumi-language-python
  (cd "$w"
   # shellcheck disable=SC2046
   go mod edit -require="github.com/pulumi/pulumi/sdk/v3@$v" $(nonpath_replaces "$sdk/go.mod")
   go get "$p@$v"
   go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$v" -o "$1" "$p")
  install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$(dirname "$1")/pulumi-language-python-exec"
}

build_provider() { # out
  local mv="$PULUMI_K8S_PROVIDER_MODULE_VERSION" v="$PULUMI_K8S_PROVIDER_VERSION" src w
  src="$(moddir "github.com/pulumi/pulumi-kubernetes/provider/v4@$mv")"
  w="$SRC_DIR/pulumi-kubernetes-provider-$mv-as-$v"
  rm -rf "$w"; cp -r "$src" "$w"; chmod -R u+w "$w"
  (cd "$w"
   # the only replace is sdk/v4 => ../sdk, which is not in the module zip
   go mod edit -dropreplace=github.com/pulumi/pulumi-kubernetes/sdk/v4
   go mod download
   (cd cmd/pulumi-resource-kubernetes && VERSION="$v" go run generate.go)
   go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$v" \
     -o "$1" ./cmd/pulumi-resource-kubernetes)
}

build_kube() { # out cmdname
  local v="$KUBERNETES_VERSION" w="$SRC_DIR/kubernetes-$KUBERNETES_VERSION" k minor sv ldf args=()
  k="$(moddir "k8s.io/kubernetes@$v")"
  minor="$(echo "$v" | cut -d. -f2)"; sv="v0.${v#v1.}"     # v1.36.3 -> v0.36.3
  if [ ! -f "$w/.ready" ]; then
    new_wrapper "$w" gpupool.local/toolchain/kubernetes
    # every staging module that k8s.io/kubernetes replaces with ./staging/src/k8s.io/<name>
    while read -r m; do args+=("-replace=$m=$m@$sv"); done < <(
      go mod edit -json "$k/go.mod" | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    if r["New"]["Path"].startswith("./staging/"): print(r["Old"]["Path"])')
    (cd "$w" && go mod edit -require="k8s.io/kubernetes@$v" "${args[@]}" \
      && go get "k8s.io/kubernetes/cmd/kube-apiserver@$v" "k8s.io/kubernetes/cmd/kube-controller-manager@$v" \
      && touch .ready)
  fi
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    ldf+=" -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  (cd "$w" && go build -trimpath -ldflags "$ldf" -o "$1" "k8s.io/kubernetes/cmd/$2")
}

build_etcd() { # out
  local v="$ETCD_VERSION" w="$SRC_DIR/etcd-$ETCD_VERSION"
  new_wrapper "$w" gpupool.local/toolchain/etcd
  cat > "$w/main.go" <<'GO'
// etcd server entry point: the same as go.etcd.io/etcd/server/v3's main.go.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$w" && go get "go.etcd.io/etcd/server/v3@$v" && go mod tidy \
    && go build -trimpath -ldflags "-s -w" -o "$1" .)
}

# gofakes3's own server command, with the dependency versions of its go.mod (the wrapper requires only it).
build_gofakes3() { # out
  local v="$GOFAKES3_VERSION" w="$SRC_DIR/gofakes3-$GOFAKES3_VERSION"
  new_wrapper "$w" gpupool.local/toolchain/gofakes3
  (cd "$w" && go get "github.com/johannesboyne/gofakes3/cmd/gofakes3@$v" \
    && go build -trimpath -ldflags "-s -w" -o "$1" github.com/johannesboyne/gofakes3/cmd/gofakes3)
}

comp_version() {
  case "$1" in
    pulumi) echo "$PULUMI_VERSION" ;;
    pulumi-language-python) echo "$PULUMI_LANGUAGE_PYTHON_VERSION" ;;
    pulumi-resource-kubernetes) echo "$PULUMI_K8S_PROVIDER_VERSION-${PULUMI_K8S_PROVIDER_MODULE_VERSION##*-}" ;;
    kube-apiserver|kube-controller-manager) echo "$KUBERNETES_VERSION" ;;
    etcd) echo "$ETCD_VERSION" ;;
    gofakes3) echo "$GOFAKES3_VERSION" ;;
    *) echo "unknown component: $1" >&2; return 2 ;;
  esac
}

build_one() { # name out
  case "$1" in
    pulumi) build_pulumi "$2" ;;
    pulumi-language-python) build_language_python "$2" ;;
    pulumi-resource-kubernetes) build_provider "$2" ;;
    kube-apiserver|kube-controller-manager) build_kube "$2" "$1" ;;
    etcd) build_etcd "$2" ;;
    gofakes3) build_gofakes3 "$2" ;;
  esac
}

rc=0; failed=()
i=0
for name in "${WANT[@]}"; do
  i=$((i + 1))
  ver="$(comp_version "$name")"
  cdir="$COMP_DIR/$name-$ver"
  if [ ! -x "$cdir/$name" ]; then
    exp="$(expected_secs "$name")"
    log "[$i/${#WANT[@]}] building $name $ver${exp:+ (expected ~${exp}s on 2 cores)}; log: $LOG_DIR/$name-$ver.log"
    mkdir -p "$cdir"; t0=$(now)
    if build_logged "$name" "$cdir/$name.tmp" "$LOG_DIR/$name-$ver.log" "$exp"; then
      mv -f "$cdir/$name.tmp" "$cdir/$name"
      secs=$(( $(now) - t0 ))
      printf 'component=%s\nversion=%s\nbuild_seconds=%s\ngo=%s\nbuilt_at=%s\nsize_bytes=%s\n' \
        "$name" "$ver" "$secs" "$(go env GOVERSION)" "$(date -u +%FT%TZ)" "$(stat -c %s "$cdir/$name")" \
        > "$cdir/BUILD_INFO"
      log "[$i/${#WANT[@]}] built $name in ${secs}s${exp:+ (expected ~${exp}s)}, $(du -h "$cdir/$name" | cut -f1)"
    else
      rm -f "$cdir/$name.tmp"; rc=1; failed+=("$LOG_DIR/$name-$ver.log")
      log "FAILED to build $name $ver after $(( $(now) - t0 ))s; last lines of $LOG_DIR/$name-$ver.log:"
      tail -n 25 "$LOG_DIR/$name-$ver.log" >&2 || true
      continue
    fi
  fi
  for f in "$name" $(companions "$name"); do
    ln -f "$cdir/$f" "$BIN_DIR/$f" 2>/dev/null || cp -f "$cdir/$f" "$BIN_DIR/$f"
  done
done

# Plugin-cache layout, so PULUMI_HOME=$ROOT/$KEY/pulumi-home finds the provider by exact version
# (resource-kubernetes-v<PULUMI_K8S_PROVIDER_VERSION>) even with PULUMI_IGNORE_AMBIENT_PLUGINS set.
if [ -x "$BIN_DIR/pulumi-resource-kubernetes" ]; then
  pd="$ROOT/$KEY/pulumi-home/plugins/resource-kubernetes-v$PULUMI_K8S_PROVIDER_VERSION"
  mkdir -p "$pd"
  ln -f "$BIN_DIR/pulumi-resource-kubernetes" "$pd/pulumi-resource-kubernetes" 2>/dev/null \
    || cp -f "$BIN_DIR/pulumi-resource-kubernetes" "$pd/pulumi-resource-kubernetes"
fi

[ $rc -eq 0 ] || { log "some components failed; full logs: ${failed[*]}"; exit $rc; }
echo "$BIN_DIR"
