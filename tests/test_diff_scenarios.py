"""The comment as a reviewer sees it: each scenario of the review's list is rendered as GitHub renders it
(GFM markdown by the pinned `marked`, the mermaid charts by the pinned `mermaid`, both in
tests/render/package-lock.json, in headless Chromium), and what a reviewer must see is checked in the text
Chromium actually shows with every collapsed section closed (`innerText` leaves out a closed <details>).

The screenshots (diff-<scenario>.png) are written to GPUPOOL_SCREENSHOT_DIR when it is set, else to the
test's temporary directory; `make test` requires the renderer (GPUPOOL_REQUIRE_RENDER). A Python check of
the same "visible without expanding" text runs without Chromium too."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.test_diff import POOLS, TENANTS, stack, with_tenants
from tests.test_diff_pictures import CHROMIUM_FLAGS, MERMAID_JS, RENDER, chromium  # noqa: F401 (fixture)

MARKED_JS = RENDER / "node_modules" / "marked" / "lib" / "marked.umd.js"


def _many(n: int, quota: int) -> dict:
    return {
        f"team-{i:04d}": {
            "name": f"team-{i:04d}",
            "tier": "standard",
            "owners": [f"g{i}"],
            "gpus": {"nvidia.com/gpu.shared": quota},
        }
        for i in range(n)
    }


def _scenarios(tmp: Path) -> dict[str, tuple[Path, Path, list[str]]]:
    """name -> (BASE, HEAD, what must be visible without expanding anything)."""
    base = stack(tmp / "base")
    out: dict[str, tuple[Path, Path, list[str]]] = {}
    vision = {"name": "vision", "tier": "standard", "owners": ["cv"], "gpus": {"nvidia.com/gpu.shared": 4}}
    out["onboarding"] = (
        base,
        stack(tmp / "onboarding", tenants=with_tenants(vision=vision)),
        ["✓ HEAD is valid", "1 tenant to onboard", "vision onboarded", "owners cv (role edit)", "ALLOWED"],
    )
    over = dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 20, "nvidia.com/mig-1g.10gb": 8})
    out["negative-headroom"] = (
        base,
        stack(tmp / "negative", tenants=with_tenants(notebooks=over)),
        ["✗ HEAD", "cannot be applied", "8 → -4 ⚠ OVER", "gpu.shared: 20 of 16 (4 OVER, was 8)"],
    )
    pools = [dict(p) for p in POOLS]
    pools[1] = dict(pools[1], sharing={"mig": {"layout": {"3g.40gb": 2}}})
    relayout = with_tenants(
        notebooks=dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 8}),
        inference=dict(TENANTS["inference"], gpus={"nvidia.com/mig-3g.40gb": 16, "nvidia.com/mig-1g.10gb": 20}),
    )
    out["mig-relayout"] = (
        base,
        stack(tmp / "mig", pools=pools, tenants=relayout),
        [
            "⚠ HEAD applies",
            "evicts GPU workloads on 2 nodes",
            "EVICTS GPU WORKLOADS on nodes gpu-a100-1",
            "affected: 2 tenants",
            "worst case",
            "after: A100-80GB GPU 0,1,2,3",
        ],
    )
    invalid = stack(tmp / "invalid", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], tier="standrd")))
    out["invalid-head"] = (
        base,
        invalid,
        [
            "✗ HEAD is INVALID (1 error)",
            "until this error is fixed",
            "unknown tier",
            "tenant notebooks is INVALID in HEAD",
        ],
    )
    big_b, big_h = stack(tmp / "big-base", tenants=_many(1000, 4)), stack(tmp / "big-head", tenants=_many(1000, 6))
    # l4-shared supplies 16 gpu.shared: allow the 6,000 the thousand tenants hold
    for p in (big_b, big_h):
        spec = yaml.safe_load(p.read_text())
        spec["oversubscription"] = {"perResource": {"nvidia.com/gpu.shared": 400}}
        p.write_text(yaml.safe_dump(spec, sort_keys=False))
    out["thousand-tenants"] = (
        big_b,
        big_h,
        [
            "✓ HEAD is valid",
            "1,000 tenants to change",
            "1,000 objects to change",
            "nvidia.com/gpu.shared 4 → 6 (+2): 1,000 tenants",
        ],
    )
    off = stack(tmp / "off-base", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], offboarded=True)))
    offboard_and_remove = with_tenants(notebooks=None, inference=dict(TENANTS["inference"], offboarded=True))
    out["offboarding-and-removal"] = (
        off,
        stack(tmp / "off-head", tenants=offboard_and_remove),
        [
            "DELETES 1 namespace",
            "removes the deletion protection of 1 namespace",
            "namespace deleted with everything in it:",
            "notebooks",
            "inference",
        ],
    )
    out["owner-role-escalation"] = (
        base,
        stack(tmp / "escalation", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], ownerRole="admin"))),
        ["⚠ HEAD applies, but it escalates the access of 1 tenant", "notebooks (ownerRole edit → admin)"],
    )
    sharded = stack(tmp / "sharded")
    spec = yaml.safe_load(sharded.read_text())
    spec["sharding"] = {"tenantShards": 2}
    sharded.write_text(yaml.safe_dump(spec, sort_keys=False))
    out["shard-move"] = (
        base,
        sharded,
        ["moves 2 tenants between Pulumi stacks", "tenants move between Pulumi stacks:"],
    )
    from tests.test_queueing import SMALL

    (tmp / "queue-base.yaml").write_text(SMALL)
    lends = SMALL.replace("inference: {lendingLimit: 0}", "inference: {}").replace(
        "nvidia.com/gpu: 2, nvidia.com/mig-1g.5gb: 3}", "nvidia.com/gpu: 1, nvidia.com/mig-1g.5gb: 3}"
    )
    (tmp / "queue-head.yaml").write_text(lends)
    out["queue-change"] = (
        tmp / "queue-base.yaml",
        tmp / "queue-head.yaml",
        [
            "reduces the guaranteed Kueue quota of 1 tenant; exposes the workloads of 1 tier to more preemption",
            "serve (whole nvidia.com/gpu 2 → 1)",
            "inference (lendingLimit 0 → none)",
            "Queues (Kueue): 2 changed",
        ],
    )
    return out


def _visible(md: str) -> str:
    """The markdown without the bodies of closed <details> (their summary line stays)."""
    return re.sub(r"<details><summary>(.*?)</summary>.*?</details>", r"\1", md, flags=re.S)


@pytest.fixture(scope="module")
def comments(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scenarios")
    import contextlib
    import io

    from gpupool.cli.main import main

    out = {}
    for name, (b, h, must) in _scenarios(tmp).items():
        buf, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            main(["diff", str(b), str(h), "-o", "markdown", "--stack", "prod", "--commit", "0123456789abcdef"])
        out[name] = (buf.getvalue(), must)
    return out


def test_what_matters_is_visible_without_expanding(comments):
    assert len(comments) == 9
    for name, (md, must) in comments.items():
        seen = _visible(md)
        for text in must:
            assert text in seen, (name, text)
        assert seen.startswith("## gpupool diff · stack `prod` · commit `0123456789ab`"), name


def _page(mds: list[str]) -> str:
    css = (
        "body{font:14px -apple-system,Segoe UI,Helvetica,Arial,sans-serif;width:980px;margin:16px;background:#fff}"
        "table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:4px 8px}"
        "blockquote{border-left:4px solid #d0d7de;margin:0;padding:0 12px;color:#1f2328}"
        "code{background:#eff1f3;padding:1px 4px;border-radius:4px}pre{background:#f6f8fa;padding:8px;overflow:auto}"
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>{css}</style>
<script src="{MARKED_JS.as_uri()}"></script><script src="{MERMAID_JS.as_uri()}"></script></head>
<body><div id="out"></div><pre id="result">pending</pre>
<script>
const mds = {json.dumps(mds)};
(async () => {{
  mermaid.initialize({{startOnLoad: false}});
  const texts = [];
  for (let i = 0; i < mds.length; i++) {{
    const div = document.createElement("div");
    div.innerHTML = marked.parse(mds[i], {{gfm: true}});
    document.getElementById("out").appendChild(div);
    for (const code of div.querySelectorAll("code.language-mermaid")) {{
      const m = document.createElement("div");
      m.className = "mermaid";
      m.textContent = code.textContent;
      code.parentElement.replaceWith(m);
    }}
    try {{ await mermaid.run({{nodes: div.querySelectorAll(".mermaid")}}); }} catch (e) {{ texts.push("MERMAID ERROR " + e); }}
    texts.push(div.innerText);
  }}
  document.getElementById("result").textContent = "RESULT:" + btoa(unescape(encodeURIComponent(JSON.stringify(texts))));
}})();
</script></body></html>"""


def _chrome(chromium: str, tmp: Path, page: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / ('profile-' + page.stem)}", *extra, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_scenarios_render_and_show_what_matters(comments, chromium, tmp_path):
    if not MARKED_JS.is_file():
        pytest.fail(f"{MARKED_JS} missing (make render-deps)")
    names = list(comments)
    page = tmp_path / "all.html"
    page.write_text(_page([comments[n][0] for n in names]), encoding="utf-8")
    dom = _chrome(chromium, tmp_path, page, "--dump-dom")
    found = re.search(r"RESULT:([A-Za-z0-9+/=]+)", dom.stdout)
    assert found, f"no result from chromium (exit {dom.returncode}): {dom.stderr[-2000:]}"
    texts = json.loads(base64.b64decode(found.group(1)).decode("utf-8"))
    assert not [t for t in texts if t.startswith("MERMAID ERROR")], texts
    assert len(texts) == len(names)
    for name, text in zip(names, texts):
        flat = " ".join(text.split())
        for must in comments[name][1]:
            assert " ".join(must.split()) in flat, (name, must)
        assert "**" not in text, name  # no literal bold markers left over
    keep = Path(os.environ.get("GPUPOOL_SCREENSHOT_DIR") or tmp_path / "shots")
    keep.mkdir(parents=True, exist_ok=True)
    for name in names:
        one = tmp_path / f"{name}.html"
        one.write_text(_page([comments[name][0]]), encoding="utf-8")
        shot = tmp_path / f"diff-{name}.png"
        _chrome(chromium, tmp_path, one, "--window-size=1020,1800", f"--screenshot={shot}")
        assert shot.is_file() and shot.stat().st_size > 5000, name
        shutil.copy(shot, keep / shot.name)
