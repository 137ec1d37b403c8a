"""A GPU Operator chart shipped beside the spec (air-gapped: `cluster.gpuOperator.chartPath`, or the stack
config's `gpupool:operatorChartPath`): where it may be, and whether it is a chart gpupool can configure.

Where: a path relative to the spec (or the project), resolved with every link followed, that stays inside
the repository: the nearest directory at or above it holding `.git` or `Pulumi.yaml`. An absolute path, or
one that leaves the repository, would make a deploy depend on (and render into the cluster) whatever that
path holds on the machine that runs it, which a pull request's reviewers cannot see.

What: gpupool configures the chart only through values, so the chart must be NVIDIA's gpu-operator chart,
or one with its values structure where gpupool writes (read from deployments/gpu-operator at v26.7.0, see
gpu-operator.yaml and docs/howto/chart-upgrade.md): `Chart.yaml` named `gpu-operator`, and in `values.yaml`
the keys `mig.strategy`, `migManager.config` and `devicePlugin.config` (a chart without them would ignore
the MIG and device-plugin configs gpupool derives, and deploy without error). A directory or a `helm
package` archive (.tgz: one top-level directory holding Chart.yaml). The chart's version should be the
spec's chartVersion, which a local chart replaces.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import yaml

CHART_NAME = "gpu-operator"
# values.yaml keys gpupool sets (gpupool.k8s.manifests: operator values), as (path, what it carries).
VALUES_KEYS = (
    (("mig", "strategy"), "the MIG strategy"),
    (("migManager", "config"), "the MIG configs"),
    (("devicePlugin", "config"), "the device-plugin (sharing) configs"),
)
MAX_ARCHIVE = 16 << 20  # a gpu-operator chart archive is a few hundred KiB
MAX_MEMBER = 1 << 20
MAX_MEMBERS = 20_000


def repository_root(start: Path) -> Path | None:
    """The nearest directory at or above START (resolved) that holds `.git` or `Pulumi.yaml`, else None."""
    here = Path(os.path.realpath(start))
    for d in (here, *here.parents):
        if (d / ".git").exists() or (d / "Pulumi.yaml").is_file():
            return d
    return None


def outside(base: Path, value: str, root: Path | None = None) -> str | None:
    """Why VALUE (a chartPath relative to BASE, the spec's directory) may not be used, or None: absolute, or
    resolving outside ROOT (default: BASE's repository; without one, only an absolute path is refused)."""
    if os.path.isabs(value):
        return "must be relative to the spec (a chart committed in the repository), not an absolute path"
    root = root or repository_root(base)
    if root is None or inside(Path(base) / value, root):
        return None
    return f"resolves outside the repository ({root.name}/, the directory holding .git or Pulumi.yaml)"


def inside(path: Path, root: Path) -> bool:
    """PATH, every link followed, is ROOT (resolved) or beneath it."""
    target, root = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    return target == root or root in target.parents


def problems(path: Path, pinned: str | None) -> list[str]:
    """What keeps the chart at PATH (a directory or .tgz) from being one gpupool configures, in words for a
    person; [] when it is fine. PINNED is the spec's chartVersion (a mismatch is reported too)."""
    try:
        chart_text, values_text = _read(path)
    except (OSError, tarfile.TarError, EOFError, UnicodeDecodeError) as exc:
        return [f"cannot be read as a chart ({type(exc).__name__})"]
    if chart_text is None:
        return ["has no Chart.yaml (give the chart's directory, or the .tgz `helm pull` wrote)"]
    try:
        chart = yaml.safe_load(chart_text)
        values = yaml.safe_load(values_text or "") or {}
    except yaml.YAMLError:
        return ["its Chart.yaml or values.yaml is not valid YAML"]
    if not isinstance(chart, dict) or not isinstance(values, dict):
        return ["its Chart.yaml or values.yaml is not a mapping"]
    out = []
    if chart.get("name") != CHART_NAME:
        out.append(f"is not the {CHART_NAME} chart (Chart.yaml name)")
    missing = [f"{'.'.join(keys)} ({what})" for keys, what in VALUES_KEYS if not _has(values, keys)]
    if missing:
        out.append("its values.yaml lacks what gpupool sets, so the chart would ignore it: " + ", ".join(missing))
    version = str(chart.get("version", ""))
    if pinned and version.removeprefix("v") != str(pinned).removeprefix("v"):
        out.append(
            f"holds chart version {_shown(version)}, not the spec's chartVersion {_shown(str(pinned))} (a local chart "
            "replaces the pinned one: vendor that version, or set chartVersion to the chart's)"
        )
    return out


def _shown(text: str) -> str:
    """A version for a message: printable and short, else a placeholder (it comes from a file)."""
    import re

    return text if re.fullmatch(r"[A-Za-z0-9.+_-]{1,40}", text) else "(unreadable)"


def _has(values: dict, keys: tuple[str, ...]) -> bool:
    node: object = values
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return False
        node = node[k]
    return True


def _read(path: Path) -> tuple[str | None, str | None]:
    """(Chart.yaml, values.yaml) texts of a chart directory or archive; None for a missing one."""
    if path.is_dir():
        return _small(path / "Chart.yaml"), _small(path / "values.yaml")
    if path.stat().st_size > MAX_ARCHIVE:
        raise OSError("archive too large")
    found: dict[str, str] = {}
    with tarfile.open(path, mode="r:*") as tar:
        for i, member in enumerate(tar):
            if i >= MAX_MEMBERS:
                break
            parts = member.name.split("/")
            if len(parts) == 2 and parts[1] in ("Chart.yaml", "values.yaml") and member.isreg():
                if member.size > MAX_MEMBER:
                    raise OSError("member too large")
                f = tar.extractfile(member)
                if f is not None:
                    found.setdefault(parts[1], f.read(MAX_MEMBER).decode("utf-8"))
    return found.get("Chart.yaml"), found.get("values.yaml")


def _small(path: Path) -> str | None:
    """A regular file's text (no link followed, a FIFO never waited on), None when it is not one."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_MEMBER + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_MEMBER:
        raise OSError("file too large")
    return data.decode("utf-8")
