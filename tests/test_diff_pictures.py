"""The pictures in the diff comment render: every ```mermaid block of real diffs is parsed and rendered by the
pinned `mermaid` package (tests/render/package-lock.json) in headless Chromium, and the slice maps line up.

`make test` installs both (tests/render: `npm ci`; Chromium: .ci/run) and sets GPUPOOL_REQUIRE_RENDER=1, so
there the test fails rather than skips when they are missing. Set GPUPOOL_SCREENSHOT_DIR to keep the
screenshot (to look at it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_diff import POOLS, TENANTS, base, run, stack, with_tenants  # noqa: F401 (base: fixture)

# Needs a binary make test builds: run after the build, with the e2e tests (ci/test.sh).
pytestmark = pytest.mark.needs_tools

RENDER = Path(__file__).parent / "render"
MERMAID_JS = RENDER / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--virtual-time-budget=20000",
]
BROKEN = 'xychart-beta\n  x-axis ["a", "b"\n  bar [1,\n'  # a control: the harness must see parse errors


def _chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


@pytest.fixture(scope="module")
def chromium():
    found = _chromium()
    if found and MERMAID_JS.is_file():
        return found
    what = "chromium" if not found else f"{MERMAID_JS} (cd tests/render && npm ci)"
    if os.environ.get("GPUPOOL_REQUIRE_RENDER"):
        pytest.fail(f"GPUPOOL_REQUIRE_RENDER is set but {what} is missing (make test installs it)")
    pytest.skip(f"{what} not installed")


def _page(diagrams: list[str], pre: list[str]) -> str:
    esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;")  # noqa: E731
    return f"""<!doctype html><html><head><meta charset="utf-8">
<script src="{MERMAID_JS.as_uri()}"></script></head>
<body style="background:white;width:1100px">{"".join(f'<pre style="font-size:13px">{esc(p)}</pre>' for p in pre)}
<div id="out"></div><pre id="result">pending</pre>
<script>
const diagrams = {json.dumps(diagrams)};
(async () => {{
  mermaid.initialize({{startOnLoad: false}});
  const results = [];
  for (let i = 0; i < diagrams.length; i++) {{
    try {{
      await mermaid.parse(diagrams[i]);
      const {{svg}} = await mermaid.render("d" + i, diagrams[i]);
      const div = document.createElement("div");
      div.style.width = "900px";
      div.innerHTML = svg;
      document.getElementById("out").appendChild(div);
      results.push({{ok: true, svg: svg}});
    }} catch (e) {{ results.push({{ok: false, error: String((e && e.message) || e)}}); }}
  }}
  document.getElementById("result").textContent = "RESULT:" + btoa(unescape(encodeURIComponent(JSON.stringify(results))));
}})();
</script></body></html>"""


def _render(chromium: str, tmp: Path, diagrams: list[str], pre: list[str]) -> tuple[list[dict], Path]:
    import base64

    page = tmp / "page.html"
    page.write_text(_page(diagrams, pre), encoding="utf-8")
    common = [chromium, *CHROMIUM_FLAGS]
    dom = subprocess.run(
        [*common, f"--user-data-dir={tmp / 'profile-dom'}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
    )
    found = re.search(r"RESULT:([A-Za-z0-9+/=]+)", dom.stdout)
    assert found, f"no result from chromium (exit {dom.returncode}): {dom.stderr[-2000:]}"
    results = json.loads(base64.b64decode(found.group(1)).decode("utf-8"))
    shot = tmp / "pictures.png"
    subprocess.run(
        [
            *common,
            f"--user-data-dir={tmp / 'profile-shot'}",
            "--window-size=1100,2400",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=180,
    )
    keep = os.environ.get("GPUPOOL_SCREENSHOT_DIR")
    if keep and shot.is_file():
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "diff-pictures.png")
    return results, shot


def _blocks(md: str, lang: str) -> list[str]:
    """The bodies of the fenced code blocks with this info string ("" = none), as GitHub reads fences."""
    out, fence, info, body = [], None, "", []
    for line in md.split("\n"):
        if fence is None:
            m = re.match(r"^(`{3,})(.*)$", line)
            if m:
                fence, info, body = m.group(1), m.group(2).strip(), []
        elif re.match(rf"^{fence}`*\s*$", line):
            if info == lang:
                out.append("\n".join(body) + "\n")
            fence = None
        else:
            body.append(line)
    return out


def _mig_change(tmp_path) -> Path:
    pools = [dict(p) for p in POOLS]
    pools[1] = dict(
        pools[1],
        sharing={
            "mig": {"perGpu": [{"gpus": [0, 1], "layout": {"3g.40gb": 2}}, {"gpus": [2, 3], "preset": "all-balanced"}]}
        },
    )
    return stack(
        tmp_path / "head",
        pools=pools,
        tenants=with_tenants(
            notebooks=dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 8, "nvidia.com/mig-1g.10gb": 8}),
            inference=dict(TENANTS["inference"], gpus={"nvidia.com/mig-3g.40gb": 6, "nvidia.com/mig-1g.10gb": 20}),
        ),
    )


def test_pictures_render(base, tmp_path, capsys, chromium):
    head = _mig_change(tmp_path)
    code, md, _ = run(capsys, base, head, "-o", "markdown")
    charts = _blocks(md, "mermaid")
    assert len(charts) == 1 and "xychart-beta" in charts[0]
    onboard = stack(
        tmp_path / "onboard",
        tenants=with_tenants(
            vision={"name": "vision", "tier": "standard", "owners": ["cv"], "gpus": {"nvidia.com/gpu.shared": 4}}
        ),
    )
    charts += _blocks(run(capsys, base, onboard, "-o", "markdown")[1], "mermaid")
    over = stack(
        tmp_path / "over",
        tenants=with_tenants(
            notebooks=dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 20, "nvidia.com/mig-1g.10gb": 8})
        ),
    )
    charts += _blocks(run(capsys, base, over, "-o", "markdown")[1], "mermaid")  # over-granted: a red part
    # negative headroom: a bar of what is granted past the line of what is allowed, the number in the label
    assert len(charts) == 3 and "gpu.shared: 20 of 16 (4 OVER, was 8)" in charts[2]
    full = stack(
        tmp_path / "full",
        tenants=with_tenants(
            notebooks=dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 16}),
            inference=dict(TENANTS["inference"], gpus={"nvidia.com/mig-3g.40gb": 4}),
        ),
    )
    charts += _blocks(run(capsys, base, full, "-o", "markdown")[1], "mermaid")  # now full; nothing granted
    assert len(charts) == 4 and "gpu.shared: 16 of 16 (now FULL, was 8)" in charts[3]
    assert "mig-1g.10gb: 0 of 128 (128 free, was 100)" in charts[3]
    for chart in charts:  # every quantity starts at zero: no bar stands for a negative number
        assert re.search(r'y-axis "units" 0 --> \d+', chart)
        assert all(int(x) >= 0 for b in re.findall(r"(?:bar|line) \[(.*)\]", chart) for x in b.split(", "))
    maps = [b for b in _blocks(md, "") if b.startswith("before:")]
    assert len(maps) == 1
    results, shot = _render(chromium, tmp_path, charts + [BROKEN], maps)
    assert [r["ok"] for r in results] == [True, True, True, True, False], [r.get("error") for r in results]
    assert "Parse error" in results[-1]["error"] or "error" in results[-1]["error"].lower()
    for chart, result in zip(charts, results):
        svg = result["svg"]
        bars = sum(len(b.split(", ")) for b in re.findall(r"bar \[(.*)\]", chart))
        # a rect per bar (both series), the title and every resource label drawn
        assert svg.count("<rect") >= bars
        assert "granted (dark) within allowed (light)" in svg
        for label in json.loads("[" + re.search(r"x-axis \[(.*)\]", chart).group(1) + "]"):
            assert label in svg
        # A bar is as long as its value: 0 draws nothing (mermaid 11.17.2 starts every bar at the plot's edge,
        # barPlot.ts, but maps values onto a range inset by half the value-axis label width, BaseAxis.getRange
        # and calculateSpaceIfDrawnHorizontally; so with those labels on, 0 was an ~12-pixel stub).
        values = [int(x) for b in re.findall(r"bar \[(.*)\]", chart) for x in b.split(", ")]
        widths = [
            float(w)
            for g in re.findall(r'<g class="bar-plot-\d"[^>]*>(.*?)</g>', svg, re.S)
            for w in re.findall(r'<rect[^>]*?width="([\d.]+)"', g)
        ]
        assert len(widths) == len(values), (widths, values)
        scale = max(values) / max(widths)
        for v, w in zip(values, widths):
            assert abs(w * scale - v) < 0.01 * max(values), (chart, values, widths)
    assert shot.is_file() and shot.stat().st_size > 5000


def test_slice_maps_line_up(base, tmp_path, capsys):
    """Each map: a header of start slots over one cell per memory slice, cells as wide as their slices."""
    head = _mig_change(tmp_path)
    md = run(capsys, base, head, "-o", "markdown")[1]
    block = next(b for b in _blocks(md, "") if b.startswith("before:"))
    lines = block.splitlines()
    titles = [i for i, line in enumerate(lines) if line.startswith(("before:", "after:"))]
    assert [lines[i] for i in titles] == [
        "before: A100-80GB GPU 0,1,2,3",
        "after: A100-80GB GPU 0,1",
        "after: A100-80GB GPU 2,3",
    ]
    for i in titles:
        header, cells = lines[i + 1], lines[i + 2]
        assert cells.startswith("[") and cells.endswith("]") and len(header) <= len(cells)
        # every start slot in the header sits right after a cell border
        starts = [m.start() for m in re.finditer(r"\d+", header)]
        borders = [0] + [m.start() for m in re.finditer(r"\|", cells)]
        assert len(starts) == len(borders), (header, cells)
        assert all(s == b + 1 for s, b in zip(starts, borders)), (header, cells)
