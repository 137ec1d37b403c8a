#!/usr/bin/env bash
# The pulumi commands of gpupool's deploy recipe, in one place: .github/workflows/gpupool.yml runs this
# script, and so do the end-to-end tests (tests/e2e/test_cli_path.py), so the two cannot drift.
#
#   ci/pulumi-stack.sh [-c KEY=VALUE]... STACK preview    login, select (or create) STACK, config, `pulumi preview --diff`
#   ci/pulumi-stack.sh [-c KEY=VALUE]... STACK up         ... recover a dead run, `pulumi up --yes`, then
#                                                        `pulumi preview --expect-no-changes` (converged?)
#   ci/pulumi-stack.sh [-c KEY=VALUE]... STACK destroy    ... recover a dead run, `pulumi destroy --yes`
#
# -c KEY=VALUE runs `pulumi config set KEY VALUE` on the stack first (e.g. -c gpupool:skipAwait=true).
#
# A sharded spec (`sharding.tenantShards: N`, docs/scale.md) spreads the platform over STACK (the
# operator, GPU ConfigMaps, node pools, tiers) and STACK.tenants-0 .. STACK.tenants-(N-1) (the tenants,
# `gpupool shards` says which where). The script then runs every one of them with the command, each with
# STACK's config plus its gpupool:shard: preview and up take STACK first, destroy takes it last. When
# tenants move between stacks (N changed, sharding switched on or off), up goes in two passes, read from
# the stacks' states: the stacks that lose tenants release them first (GPUPOOL_KEEP_TENANTS), then
# every stack applies; so no stack deletes what another has just adopted (gpupool/analysis/shard_moves.py).
#
# Environment:
#   PULUMI_BACKEND_URL        the state backend (required), e.g. s3://bucket/gpupool or
#                             file:///srv/pulumi-state?metadata=skip (see docs/ci.md, "State backend")
#   PULUMI_CONFIG_PASSPHRASE  the passphrase secrets provider's passphrase
#   GPUPOOL_SINGLE_WRITER=1   the caller guarantees that nothing else updates STACK (the workflow's
#                             concurrency group): a lock held from ANOTHER host is then a dead run's and
#                             is cancelled. Without it only locks of dead processes on this host are.
#   GPUPOOL_PREVIEW_OUT=FILE  also write the `preview --diff` text to FILE (the pull-request comment)
#   GPUPOOL_PROJECT_DIR       the Pulumi project (default: this script's repository)
#
# Recovery from a dead run (cancelled or timed-out job, SIGKILL, machine loss), done without a person:
#   * a stale lock (holder dead, see above) is removed with `pulumi cancel`, and the command retried once;
#   * a torn metadata sidecar of the file backend (an empty or truncated `*.attrs`, left when the writer
#     died between truncating and rewriting it; every command then fails with "failed to load checkpoint:
#     EOF") is removed: it holds only content-type metadata, and a missing sidecar is valid;
#   * pending operations of the dead run are dropped by `pulumi up` itself; objects it had created are
#     adopted again because the provider creates with server-side apply (see docs/ci.md).
set -euo pipefail

usage() { sed -n '2,21p' "$0" >&2; exit 2; }

configs=()
while getopts "c:h" opt; do
  case "$opt" in
    c) configs+=("$OPTARG") ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || usage
STACK="$1" OP="$2"
case "$OP" in preview|up|destroy) ;; *) usage ;; esac
: "${PULUMI_BACKEND_URL:?set PULUMI_BACKEND_URL to the state backend (docs/ci.md)}"

cd "${GPUPOOL_PROJECT_DIR:-$(dirname "${BASH_SOURCE[0]}")/..}"
log() { echo "[pulumi-stack] $*" >&2; }

# Pulumi.yaml names the program's virtualenv (runtime.options.virtualenv). A current pulumi CLI passes
# that option to its language host over gRPC; the offline-built host (toolchain/README.md) predates that
# and would run the program with whatever `python` is first on PATH. Putting the venv's bin first on
# PATH makes both hosts run the program in that venv.
venv="$(sed -n 's/^ *virtualenv: *//p' Pulumi.yaml | head -n 1)"
venv="${venv:-.venv}"
[ -x "$venv/bin/python" ] || {
  log "Pulumi.yaml's virtualenv '$venv' has no bin/python: python -m venv $venv && $venv/bin/pip install -e '.[pulumi]'"
  exit 2
}
export VIRTUAL_ENV="$PWD/$venv" PATH="$PWD/$venv/bin:$PATH"

# ---------------------------------------------------------------- dead-run recovery

# The file backend's directory, if PULUMI_BACKEND_URL is a file:// URL.
file_backend_dir() {
  case "$PULUMI_BACKEND_URL" in
    file://*) local d="${PULUMI_BACKEND_URL#file://}"; d="${d%%\?*}"; echo "${d/#\~/$HOME}" ;;
  esac
}

repair_torn_sidecars() {
  local dir f; dir="$(file_backend_dir)"
  [ -n "$dir" ] && [ -d "$dir/.pulumi" ] || return 0
  while IFS= read -r -d '' f; do
    if ! python -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" 2>/dev/null; then
      log "removing torn metadata sidecar $f (left by a run that died while writing it)"
      rm -f -- "$f"
    fi
  done < <(find "$dir/.pulumi" -name '*.attrs' -print0)
}

# Is the lock holder "USER@HOST (pid PID) at TIMESTAMP" gone?
holder_dead() {
  local host="$1" pid="$2" ts="$3" started
  if [ "$host" != "$(hostname)" ]; then
    [ "${GPUPOOL_SINGLE_WRITER:-}" = 1 ]   # only the caller can know that a foreign holder is dead
    return
  fi
  kill -0 "$pid" 2>/dev/null || return 0
  # pid reused since: a process that is not pulumi, or one started after the lock was taken
  [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = pulumi ] || return 0
  started="$(date -d "$(ps -o lstart= -p "$pid")" +%s 2>/dev/null || echo 0)"
  [ "$started" -gt $(( $(date -d "$ts" +%s 2>/dev/null || echo 0) + 1 )) ]
}

# Locks named in a failed command's output; 0 if there were some and every holder is dead.
only_stale_locks() {
  local out="$1" line n=0 who host pid ts
  while IFS= read -r line; do
    who="${line#created by }"; who="${who%% (pid*}"; host="${who##*@}"
    pid="$(sed -E 's/.*\(pid ([0-9]+)\).*/\1/' <<<"$line")"; ts="${line##* at }"
    n=$((n + 1))
    if holder_dead "$host" "$pid" "$ts"; then
      log "stale lock: $line (holder gone)"
    else
      log "live lock: $line; not touching it (GPUPOOL_SINGLE_WRITER=1 if no other run can hold it)"
      return 1
    fi
  done < <(grep -oE 'created by [^ ]+ \(pid [0-9]+\) at [^ ]+' "$out")
  [ "$n" -gt 0 ]
}

# Run a state-changing pulumi command; on "currently locked" by dead holders only, cancel and retry once.
run_locked() {
  local out rc; out="$(mktemp)"
  for attempt in 1 2; do
    set +e; pulumi "$@" 2>&1 | tee "$out"; rc=${PIPESTATUS[0]}; set -e
    [ "$rc" -ne 0 ] && [ "$attempt" = 1 ] && grep -q 'the stack is currently locked' "$out" \
      && only_stale_locks "$out" || break
    log "cancelling the dead run's lock (pulumi cancel) and retrying"
    pulumi cancel --yes --stack "$STACK"
  done
  rm -f "$out"
  return "$rc"
}

# A pending operation of a dead run that this run has since carried out (the resource is in the state
# now) is stale: drop it, so later runs stop warning about it. One whose resource is not in the state is
# left for a person (it may be an object the dead run created that nothing manages now).
clear_resolved_pending() {
  local state; state="$(mktemp)"
  pulumi stack export --stack "$STACK" > "$state"
  if python - "$state" <<'PY'
import json, sys
path = sys.argv[1]
try:
    doc = json.load(open(path))
except ValueError:
    sys.exit(1)
dep = doc.get("deployment") or {}
pending = dep.get("pending_operations") or []
if not pending:
    sys.exit(1)
urns = {r["urn"] for r in dep.get("resources") or []}
unresolved = [op["resource"]["urn"] for op in pending if op["resource"]["urn"] not in urns]
if unresolved:
    print("[pulumi-stack] pending operations of a dead run whose resource is not in the state; check them, "
          "then `pulumi refresh`:\n  " + "\n  ".join(unresolved), file=sys.stderr)
    sys.exit(1)
print(f"[pulumi-stack] dropping {len(pending)} pending operations of a dead run: this run completed them",
      file=sys.stderr)
dep["pending_operations"] = []
json.dump(doc, open(path, "w"))
PY
  then
    pulumi stack import --stack "$STACK" --file "$state" >/dev/null
  fi
  rm -f "$state"
}

# ---------------------------------------------------------------- one stack

# OP on one stack ($STACK, dynamically scoped: the shard loop below sets it per stack).
one_stack() {
  case "$1" in
    preview)
      if [ -n "${GPUPOOL_PREVIEW_OUT:-}" ]; then
        pulumi preview --non-interactive --diff --stack "$STACK" 2>&1 | tee -a "$GPUPOOL_PREVIEW_OUT"
        return "${PIPESTATUS[0]}"
      fi
      pulumi preview --non-interactive --diff --stack "$STACK" ;;
    up)
      run_locked up --non-interactive --yes --diff --stack "$STACK"
      clear_resolved_pending
      # Converged: the live stack now matches the program (also after a recovered dead run).
      pulumi preview --non-interactive --expect-no-changes --stack "$STACK" ;;
    destroy)
      run_locked destroy --non-interactive --yes --stack "$STACK" ;;
  esac
}

# ---------------------------------------------------------------- a sharded platform

# Select (or create) shard stack $STACK with the platform stack's config and its own gpupool:shard.
select_shard() {
  local shard="$1"
  pulumi stack select --non-interactive --create "$STACK" >/dev/null
  pulumi config cp --stack "$PLATFORM" --dest "$STACK" >/dev/null
  pulumi config set --stack "$STACK" -- gpupool:shard "$shard"
}

# The platform's stacks, as `gpupool shards -o json` (with the existing stacks' states for up); fails
# when the spec is invalid (the platform stack's own run then shows why, as without sharding).
shard_layout() {
  local out="$1" with_states="$2" spec states s
  spec="$(pulumi config get --stack "$PLATFORM" gpupool:spec 2>/dev/null)" && [ -n "$spec" ] || return 1
  states="$work/states"; mkdir -p "$states"
  pulumi stack ls --json > "$work/stacks.json"
  while IFS= read -r s; do
    [ "$s" = "$PLATFORM" ] || [[ "$s" == "$PLATFORM".tenants-* ]] || continue
    if [ "$with_states" = 1 ]; then
      pulumi stack export --stack "$s" > "$states/$s.json"
    else
      echo '{}' > "$states/$s.json"   # exists; what it holds is not needed
    fi
  done < <(python -c 'import json,sys; [print(s["name"]) for s in json.load(open(sys.argv[1]))]' "$work/stacks.json")
  gpupool shards "$spec" --platform-stack "$PLATFORM" --states "$states" -o json > "$out" 2>"$work/shards.err"
}

# Rows of the layout: STACK SHARD EXISTS RUN RELEASE_FIRST APPLY_PASS (gpupool shards decides each;
# gpupool/analysis/shard_moves.py), the keep lists in $work/keep-STACK.json
layout_rows() {
  python - "$1" "$work" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for s in doc["stacks"]:
    json.dump(s["keep"], open(f"{sys.argv[2]}/keep-{s['stack']}.json", "w"))
    flags = [s["exists"], s["run"], s["releaseFirst"], s["applyPass"]]
    print(s["stack"], s["shard"] or "-", *(int(f) for f in flags))
PY
}

is_sharded() {  # a spec with tenant shards, or shard stacks left from one
  python -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["sharded"] else 1)' "$1"
}

sharded() {
  local rows stack shard exists run release apply
  rows="$(layout_rows "$1")"
  run_stack() {  # OP STACK SHARD: the op on one stack of the platform, its config set first
    local STACK="$2"
    [ "$3" = - ] || select_shard "$3"
    log "$1 $STACK${GPUPOOL_KEEP_TENANTS:+ (release pass: keeps only the tenants it holds)}"
    one_stack "$1"
  }
  # `if`, not `&&`: a false test as a loop's last command would make the function return 1 under set -e.
  case "$OP" in
    preview)
      while read -r stack shard exists run release apply; do
        if [ "$run" = 1 ]; then run_stack preview "$stack" "$shard"; fi
      done <<<"$rows" ;;
    up)
      while read -r stack shard exists run release apply; do
        if [ "$release" = 1 ]; then GPUPOOL_KEEP_TENANTS="$work/keep-$stack.json" run_stack up "$stack" "$shard"; fi
      done <<<"$rows"
      while read -r stack shard exists run release apply; do
        if [ "$apply" = 1 ]; then run_stack up "$stack" "$shard"; fi
      done <<<"$rows" ;;
    destroy)
      while read -r stack shard exists run release apply; do
        if [ "$exists" = 1 ]; then run_stack destroy "$stack" "$shard"; fi
      done < <(tac <<<"$rows") ;;
  esac
}

repair_torn_sidecars
pulumi login --non-interactive "$PULUMI_BACKEND_URL" >/dev/null
pulumi stack select --non-interactive --create "$STACK" >/dev/null
for kv in ${configs[@]+"${configs[@]}"}; do
  pulumi config set --stack "$STACK" -- "${kv%%=*}" "${kv#*=}"
done

PLATFORM="$STACK"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
# rm first: `:>` and `tee -a` would write through a link planted at that name (rm removes the link itself).
[ -z "${GPUPOOL_PREVIEW_OUT:-}" ] || { rm -f -- "$GPUPOOL_PREVIEW_OUT" && : > "$GPUPOOL_PREVIEW_OUT"; }
# Not in an `if`: inside one, bash would ignore `set -e` in every function it calls, and a failed stack
# would not stop the run.
layout=""
if shard_layout "$work/layout.json" 0 && is_sharded "$work/layout.json"; then
  layout="$work/layout.json"
  if [ "$OP" = up ]; then   # what each stack holds now decides the passes
    shard_layout "$work/layout-states.json" 1
    layout="$work/layout-states.json"
  fi
fi
if [ -n "$layout" ]; then
  sharded "$layout"
else
  one_stack "$OP"
fi
