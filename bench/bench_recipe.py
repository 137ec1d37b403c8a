"""bench_e2e.py's ``recipe=S`` mode: ``gpupool stacks`` run as the CI recipe runs it (docs/howto/ci.md), on
the platform sharded S tenants per shard, in a project directory as a user has it (tests/e2e/cli.py's
CliProject: the project's virtualenv console script, the real pulumi CLI, language host and provider, a file
backend).

Timed, each the whole command's wall time:

* up:       ``gpupool stacks up dev`` from empty (every stack: refresh, up, the convergence preview; tenant
            shards checkpoint-free; then the label sweep).
* preview:  ``gpupool stacks preview dev --refresh`` of the unchanged platform, the pull-request job
            (asserted: every stack skipped, unchanged since its last up).
* onboard:  ``gpupool stacks up dev`` after one tenant is added, the merge's deploy job (asserted: only the
            new tenant's shard and the stacks whose inputs it changes ran; which ran is printed).
* nightly:  ``gpupool stacks up dev --all --refresh``, the scheduled job that repairs drift (every stack);
* all-no-refresh: the same without reading the cluster (``--no-refresh``): nightly minus this is what the
            refresh costs.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import time
from pathlib import Path

import yaml

SPEC = "bench-spec/spec.yaml"
SUMMARY = re.compile(r"^(?P<stack>\S+): (?P<op>up|preview|sweep) (?P<result>succeeded|skipped|failed)", re.M)


def _summary(out: str) -> dict[str, str]:
    """stack -> result of its up or preview, from the command's summary lines."""
    return {m["stack"]: m["result"] for m in SUMMARY.finditer(out) if m["op"] != "sweep"}


def _run(project, op: str, *flags: str, timeout: float = 7200) -> tuple[float, str]:
    argv = [*project._argv(op, all_stacks=False), *flags]
    t0 = time.perf_counter()
    p = subprocess.run(
        argv,
        cwd=project.dir,
        env=project.env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
    )
    dt = time.perf_counter() - t0
    (project.dir.parent / f"{op}-{time.monotonic_ns()}.log").write_text(
        f"# bench {op} {' '.join(flags)}: {dt:.1f} s\n{p.stdout}"
    )
    if p.returncode != 0:
        raise SystemExit(f"gpupool stacks {op} {' '.join(flags)} exited {p.returncode}:\n{p.stdout[-4000:]}")
    return dt, p.stdout


def run_recipe(
    cp,
    bin_dir: Path,
    base_doc: dict,
    work: Path,
    check_same,
    *,
    per_shard: int,
    onboarded_doc: dict | None,
    settle,
    load,
    nightly: bool = True,
) -> tuple[float, float, dict]:
    """(up seconds, preview seconds, info) like bench_e2e.run_pulumi; info has onboard, nightly and loads."""
    from tests.e2e.cli import CliProject

    root = work / f"recipe-{per_shard}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    shards = max(1, math.ceil(len(base_doc["tenants"]) / per_shard))
    project = CliProject(bin_dir, cp.kubeconfig, root, stack="dev", spec=SPEC)

    def write(doc: dict) -> None:
        project.write(SPEC, yaml.safe_dump(dict(doc, sharding={"tenantShards": shards}), sort_keys=False, width=120))

    write(base_doc)
    info: dict = {"loads": {}, "ran": {}}
    t_up, out = _run(project, "up")
    info["loads"]["up"] = load()
    ran = _summary(out)
    assert all(r == "succeeded" for r in ran.values()), ran
    info["stacks"] = len(ran)
    info["steps"] = sum(len(project.export(s)["deployment"].get("resources") or []) for s in ran)
    settle(cp)
    check_same(cp)
    t_preview, out = _run(project, "preview", "--refresh")
    info["loads"]["preview"] = load()
    previewed = _summary(out)
    assert set(previewed.values()) == {"skipped"}, f"the unchanged preview ran stacks: {previewed}"
    if onboarded_doc is not None:
        write(onboarded_doc)
        info["onboard"], out = _run(project, "up")
        info["loads"]["onboard"] = load()
        info["ran"]["onboard"] = sorted(s for s, r in _summary(out).items() if r == "succeeded")
        found = re.findall(r"^\S+: up succeeded \((\d+) create", out, re.M)
        info["onboard creates"] = sum(int(n) for n in found)
    if not nightly:
        return t_up, t_preview, info
    info["nightly"], out = _run(project, "up", "--all", "--refresh")
    info["loads"]["nightly"] = load()
    nightly = _summary(out)
    assert set(nightly.values()) == {"succeeded"} and len(nightly) >= info["stacks"], nightly
    assert "did not converge" not in out
    # The same run without reading the cluster: the difference is what the drift repair (refresh) costs.
    info["all-no-refresh"], out = _run(project, "up", "--all", "--no-refresh")
    info["loads"]["all-no-refresh"] = load()
    assert set(_summary(out).values()) == {"succeeded"}, out[-3000:]
    return t_up, t_preview, info
