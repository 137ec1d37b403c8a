#!/usr/bin/env bash
# Build the gpupool toolchain (pulumi CLI, pulumi-language-python, pulumi-resource-kubernetes,
# kube-apiserver, kube-controller-manager, etcd, gofakes3, an S3-compatible server for the state-backend
# tests, prometheus with promtool for the monitoring tests, and Kueue's manager for the queueing tests)
# from Go modules into a cache OUTSIDE the repo.
#
#   toolchain/build.sh                  build what is missing; last stdout line = bin dir
#   toolchain/build.sh --print-bin-dir  print the bin dir only (no build); exit 0
#   toolchain/build.sh --check          exit 0 if every binary is present, 1 otherwise (no build)
#   toolchain/build.sh --list           the components, one per line
#   toolchain/build.sh NAME...          build only these (see --list)
#
# Missing components are built GPUPOOL_TOOLCHAIN_JOBS (default 2) at a time, longest first: one Go build
# keeps only about one of 2 cores busy on average (downloads, code generation and the single-threaded link
# leave the other idle). At the end a table gives each component's time. Env: GPUPOOL_TOOLCHAIN_DIR (default
# $HOME/.cache/gpupool-toolchain), GOFLAGS_P (parallelism of each go build, default 2). Needs only Go
# (>= go.mod's go line of each module) and a Go module proxy. Versions come from toolchain/versions.env only.
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

# ---------------------------------------------------------------- the components
# component NAME VERSION FUNCTION [after=NAME] [also=FILE...]: FUNCTION OUT builds NAME's binary at OUT.
#   after=  a component to wait for: this one reuses its compiled packages from the Go build cache, so
#           building both at once would compile those packages twice;
#   also=   files the build installs next to the binary (same component dir, same bin dir).
# Adding a component is its build function below, one line here and a row in toolchain/README.md's table.
ALL=()
declare -A VERSION_OF=() FUNC_OF=() AFTER_OF=() ALSO_OF=()
component() {
  local name="$1" a
  ALL+=("$name"); VERSION_OF[$name]="$2"; FUNC_OF[$name]="$3"; AFTER_OF[$name]=""; ALSO_OF[$name]=""
  shift 3
  for a in "$@"; do
    case "$a" in
      after=*) AFTER_OF[$name]="${a#after=}" ;;
      also=*) ALSO_OF[$name]+="${ALSO_OF[$name]:+ }${a#also=}" ;;
    esac
  done
}
component etcd "$ETCD_VERSION" build_etcd
component kube-apiserver "$KUBERNETES_VERSION" build_kube_apiserver
component kube-controller-manager "$KUBERNETES_VERSION" build_kube_controller_manager after=kube-apiserver
component kube-scheduler "$KUBERNETES_VERSION" build_kube_scheduler after=kube-apiserver
component pulumi "$PULUMI_VERSION" build_pulumi
component pulumi-language-python "$PULUMI_LANGUAGE_PYTHON_VERSION" build_language_python also=pulumi-language-python-exec
component pulumi-resource-pulumi-python "$PULUMI_VERSION" install_dynamic_python
component pulumi-resource-kubernetes "$PULUMI_K8S_PROVIDER_VERSION-${PULUMI_K8S_PROVIDER_MODULE_VERSION##*-}" build_provider
component gofakes3 "$GOFAKES3_VERSION" build_gofakes3
component prometheus "$PROMETHEUS_VERSION" build_prometheus also=promtool
component kueue-manager "$KUEUE_VERSION" build_kueue also=kueue-crds.yaml
component jobset-manager "$JOBSET_VERSION" build_jobset after=kueue-manager also=jobset-crds.yaml

case "${1:-}" in
  --print-bin-dir) echo "$BIN_DIR"; exit 0 ;;
  --check)
    for b in "${ALL[@]}"; do
      for f in "$b" ${ALSO_OF[$b]}; do
        # data files beside a binary (kueue-crds.yaml) are not executable
        case "$f" in *.yaml) [ -f "$BIN_DIR/$f" ] ;; *) [ -x "$BIN_DIR/$f" ] ;; esac \
          || { echo "missing: $BIN_DIR/$f" >&2; exit 1; }
      done
    done
    echo "$BIN_DIR"; exit 0 ;;
  --list) printf '%s\n' "${ALL[@]}"; exit 0 ;;
  -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
esac
WANT=("$@"); [ ${#WANT[@]} -gt 0 ] || WANT=("${ALL[@]}")
for name in "${WANT[@]}"; do
  [ -n "${VERSION_OF[$name]:-}" ] || { echo "build.sh: unknown component: $name (see --list)" >&2; exit 2; }
done

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

# The host of Python dynamic providers (the MIG rollout's drain step): a shell script the Pulumi CLI ships next to
# its binary, where the engine looks for it (sdk/go/common/workspace/plugins.go, IsPluginBundled and the
# "next to the current executable" lookup). It is sdk/v3's python/dist script of the CLI's own version, from the
# module zip; nothing to compile.
install_dynamic_python() { # out
  local sdk
  sdk="$(moddir "github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION")"
  install -m 0755 "$sdk/python/dist/pulumi-resource-pulumi-python" "$1"
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

build_kube() { # cmdname out
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
        "k8s.io/kubernetes/cmd/kube-scheduler@$v" \
      && touch .ready)
  fi
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    ldf+=" -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  (cd "$w" && go build -trimpath -ldflags "$ldf" -o "$2" "k8s.io/kubernetes/cmd/$1")
}

build_kube_apiserver() { build_kube kube-apiserver "$1"; }
build_kube_controller_manager() { build_kube kube-controller-manager "$1"; }
build_kube_scheduler() { build_kube kube-scheduler "$1"; }

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

# prometheus and promtool from one module in one `go build` (shared packages compile once). Only these two
# commands; remove_all_sd leaves out every service-discovery plugin but file and http (plugins/*.go build
# tags), which the tests do not use and which are most of the module's code (cloud SDKs).
build_prometheus() { # out (promtool lands next to it)
  local v="$PROMETHEUS_VERSION" w="$SRC_DIR/prometheus-$PROMETHEUS_VERSION" d
  local m=github.com/prometheus/prometheus
  new_wrapper "$w" gpupool.local/toolchain/prometheus
  d="$(dirname "$1")/.prometheus-build"; rm -rf "$d"; mkdir -p "$d"
  (cd "$w" && go get "$m/cmd/prometheus@$v" "$m/cmd/promtool@$v" \
    && go build -tags remove_all_sd -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${v#v}" \
      -o "$d/" "$m/cmd/prometheus" "$m/cmd/promtool")
  mv -f "$d/promtool" "$(dirname "$1")/promtool"; mv -f "$d/prometheus" "$1"; rm -rf "$d"
}

# Kueue's manager (cmd/kueue) for tests/e2e/test_kueue.py, and its CRDs from the same module zip
# (config/components/crd/bases, what the release's manifests install), concatenated next to the binary.
build_kueue() { # out
  local v="$KUEUE_VERSION" w="$SRC_DIR/kueue-$KUEUE_VERSION" src
  new_wrapper "$w" gpupool.local/toolchain/kueue
  (cd "$w" && go get "sigs.k8s.io/kueue/cmd/kueue@$v" \
    && go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$v" -o "$1" sigs.k8s.io/kueue/cmd/kueue)
  src="$(moddir "sigs.k8s.io/kueue@$v")"
  for f in "$src"/config/components/crd/bases/*.yaml; do printf -- '---\n'; cat "$f"; done > "$(dirname "$1")/kueue-crds.yaml"
}

# JobSet's manager (the module's root package) for tests/e2e/test_kueue.py, and its CRD from the same module
# zip (config/components/crd/bases). After kueue-manager: most of its packages (controller-runtime, k8s.io/*)
# are already in the Go build cache then.
build_jobset() { # out
  local v="$JOBSET_VERSION" w="$SRC_DIR/jobset-$JOBSET_VERSION" src
  new_wrapper "$w" gpupool.local/toolchain/jobset
  (cd "$w" && go get "sigs.k8s.io/jobset@$v" \
    && go build -trimpath -ldflags "-s -w" -o "$1" sigs.k8s.io/jobset)
  src="$(moddir "sigs.k8s.io/jobset@$v")"
  for f in "$src"/config/components/crd/bases/*.yaml; do printf -- '---\n'; cat "$f"; done > "$(dirname "$1")/jobset-crds.yaml"
}

# ---------------------------------------------------------------- the build

declare -A PID_OF=() T0_OF=() LAST_OF=() SECS_OF=() RESULT_OF=() IDX_OF=()   # RESULT_OF: cached, built, failed, skipped
todo=() failed=()
for name in "${WANT[@]}"; do
  if [ -x "$COMP_DIR/$name-${VERSION_OF[$name]}/$name" ]; then RESULT_OF[$name]=cached; else todo+=("$name"); fi
done
# Longest first (toolchain/README.md's cold times; a component without a row counts as long): the
# provider alone takes about as long as everything else, so it must not start last.
if [ ${#todo[@]} -gt 1 ]; then
  mapfile -t todo < <(for name in "${todo[@]}"; do e="$(expected_secs "$name")"; echo "${e:-99999} $name"; done \
    | sort -s -k1,1nr | cut -d' ' -f2)
fi
n_todo=${#todo[@]} i=0

log_of() { echo "$LOG_DIR/$1-${VERSION_OF[$1]}.log"; }

start() { # name: its build in the background, output in its log
  local name="$1" cdir="$COMP_DIR/$1-${VERSION_OF[$1]}" exp
  i=$((i + 1)); IDX_OF[$name]="[$i/$n_todo]"; exp="$(expected_secs "$name")"
  log "${IDX_OF[$name]} building $name ${VERSION_OF[$name]}${exp:+ (expected ~${exp}s on 2 cores)}; log: $(log_of "$name")"
  mkdir -p "$cdir"
  # shellcheck disable=SC2086  # FUNC_OF is a function name
  ${FUNC_OF[$name]} "$cdir/$name.tmp" >"$(log_of "$name")" 2>&1 &
  PID_OF[$name]=$!; T0_OF[$name]=$(now); LAST_OF[$name]=0
}

finish() { # name rc
  local name="$1" cdir="$COMP_DIR/$1-${VERSION_OF[$1]}" exp secs
  exp="$(expected_secs "$name")"; secs=$(( $(now) - ${T0_OF[$name]} )); SECS_OF[$name]=$secs
  unset "PID_OF[$name]"
  if [ "$2" -eq 0 ] && [ -x "$cdir/$name.tmp" ]; then
    mv -f "$cdir/$name.tmp" "$cdir/$name"
    printf 'component=%s\nversion=%s\nbuild_seconds=%s\ngo=%s\nbuilt_at=%s\nsize_bytes=%s\n' \
      "$name" "${VERSION_OF[$name]}" "$secs" "$(go env GOVERSION)" "$(date -u +%FT%TZ)" "$(stat -c %s "$cdir/$name")" \
      > "$cdir/BUILD_INFO"
    RESULT_OF[$name]=built
    log "${IDX_OF[$name]} built $name in ${secs}s${exp:+ (expected ~${exp}s)}, $(du -h "$cdir/$name" | cut -f1)"
  else
    rm -f "$cdir/$name.tmp"; RESULT_OF[$name]=failed; failed+=("$(log_of "$name")")
    log "FAILED to build $name ${VERSION_OF[$name]} after ${secs}s; last lines of $(log_of "$name"):"
    tail -n 25 "$(log_of "$name")" >&2 || true
  fi
}

# Ready: what it waits for is not (or no longer) being built. A component whose `after` failed is skipped.
ready() {
  local after="${AFTER_OF[$1]}" n
  [ -n "$after" ] || return 0
  [ -z "${PID_OF[$after]:-}" ] || return 1
  for n in "${todo[@]}"; do [ "$n" != "$after" ] || return 1; done
}

trap 'for p in "${PID_OF[@]}"; do kill "$p" 2>/dev/null; done; exit 130' INT TERM
jobs_max="${GPUPOOL_TOOLCHAIN_JOBS:-2}"
while [ ${#todo[@]} -gt 0 ] || [ ${#PID_OF[@]} -gt 0 ]; do
  rest=()
  for name in "${todo[@]}"; do
    after="${AFTER_OF[$name]}"
    if [ -n "$after" ] && [ "${RESULT_OF[$after]:-}" = failed ]; then
      RESULT_OF[$name]=skipped; log "skipping $name: it needs $after, which failed"
    elif [ ${#PID_OF[@]} -lt "$jobs_max" ] && ready "$name"; then
      start "$name"
    else
      rest+=("$name")
    fi
  done
  todo=("${rest[@]}")
  sleep "${POLL_SECS:-2}"
  for name in "${!PID_OF[@]}"; do
    pid="${PID_OF[$name]}"
    if ! kill -0 "$pid" 2>/dev/null; then
      set +e; wait "$pid"; rc=$?; set -e
      finish "$name" "$rc"
    else
      elapsed=$(( $(now) - ${T0_OF[$name]} ))
      if [ $(( elapsed - ${LAST_OF[$name]} )) -ge "${PROGRESS_SECS:-60}" ]; then
        LAST_OF[$name]=$elapsed; exp="$(expected_secs "$name")"
        log "  $name: ${elapsed}s elapsed${exp:+ of ~${exp}s expected}; $(tail -n 1 "$(log_of "$name")" 2>/dev/null | cut -c1-100)"
      fi
    fi
  done
done
trap - INT TERM

for name in "${WANT[@]}"; do
  [ "${RESULT_OF[$name]}" = cached ] || [ "${RESULT_OF[$name]}" = built ] || continue
  cdir="$COMP_DIR/$name-${VERSION_OF[$name]}"
  for f in "$name" ${ALSO_OF[$name]}; do
    ln -f "$cdir/$f" "$BIN_DIR/$f" 2>/dev/null || cp -f "$cdir/$f" "$BIN_DIR/$f"
  done
done

# Each step's time, for `make test`'s summary (a cached component took no time).
if [ "$n_todo" -gt 0 ]; then
  log "component times (wall, ${jobs_max} at a time; total ${SECONDS}s):"
  for name in "${WANT[@]}"; do
    case "${RESULT_OF[$name]}" in
      cached) log "  $(printf '%-28s' "$name") cached" ;;
      skipped) log "  $(printf '%-28s' "$name") skipped" ;;
      *) log "  $(printf '%-28s %5ss  %s' "$name" "${SECS_OF[$name]}" "${RESULT_OF[$name]}")" ;;
    esac
  done
fi

# Plugin-cache layout, so PULUMI_HOME=$ROOT/$KEY/pulumi-home finds the provider by exact version
# (resource-kubernetes-v<PULUMI_K8S_PROVIDER_VERSION>) even with PULUMI_IGNORE_AMBIENT_PLUGINS set.
if [ -x "$BIN_DIR/pulumi-resource-kubernetes" ]; then
  pd="$ROOT/$KEY/pulumi-home/plugins/resource-kubernetes-v$PULUMI_K8S_PROVIDER_VERSION"
  mkdir -p "$pd"
  ln -f "$BIN_DIR/pulumi-resource-kubernetes" "$pd/pulumi-resource-kubernetes" 2>/dev/null \
    || cp -f "$BIN_DIR/pulumi-resource-kubernetes" "$pd/pulumi-resource-kubernetes"
fi

[ ${#failed[@]} -eq 0 ] || { log "some components failed; full logs: ${failed[*]}"; exit 1; }
echo "$BIN_DIR"
