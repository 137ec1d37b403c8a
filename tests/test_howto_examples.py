"""The how-tos' examples work in the repository `gpupool init` scaffolds (issue 41 item 7): every
`gpupool tenant new` command in a how-to's shell blocks writes a tenant the scaffold's spec accepts once its
placeholders are filled in, every YAML block that is a tenant validates as one, and every `monitoring:` block
validates in the scaffold's spec. The examples are read from the markdown, so an edit to a how-to or to the
scaffold that parts them fails here (the onboarding how-to once used `gpu=4`, which the scaffolded L4 pool,
time-sliced and renamed `.shared`, does not advertise).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from gpupool.cli.main import main
from gpupool.rules.engine import validate_file

HOWTO = Path(__file__).resolve().parents[1] / "docs" / "howto"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[a-z]*)\n(?P<body>.*?)^(?P=indent)```", re.S | re.M)


def _blocks(lang: str) -> list[tuple[str, str]]:
    out = []
    for page in sorted(HOWTO.glob("*.md")):
        for m in FENCE.finditer(page.read_text(encoding="utf-8")):
            if m.group("lang") == lang:
                indent = m.group("indent")
                body = "".join(line.removeprefix(indent) for line in m.group("body").splitlines(keepends=True))
                out.append((page.name, body))
    return out


def _tenant_new_commands() -> list[tuple[str, list[str]]]:
    commands = []
    for page, body in _blocks("sh"):
        for line in body.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("gpupool tenant new "):
                commands.append((page, shlex.split(line)[1:]))
    return commands


@pytest.fixture
def team(tmp_path, monkeypatch) -> Path:
    assert main(["init", str(tmp_path / "team")]) == 0
    monkeypatch.chdir(tmp_path / "team")
    return tmp_path / "team"


def _errors(spec: Path) -> list[str]:
    result = validate_file(str(spec))
    return [d.render() for d in result.report.sorted() if d.is_error]


def test_the_onboarding_howto_has_a_tenant_new_example():
    assert any(page == "onboarding.md" for page, _ in _tenant_new_commands())


@pytest.mark.parametrize("page,argv", _tenant_new_commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_tenant_new_examples_work_in_the_scaffold(team, page, argv, capsys):
    assert main(argv) == 0, capsys.readouterr().err
    name = argv[2]
    stack = argv[argv.index("--stack") + 1]
    tenant = team / "stacks" / stack / "tenants" / f"{name}.yaml"
    assert tenant.is_file()
    # the placeholders filled in as the how-to says: then the stack is valid with the new tenant
    text = tenant.read_text().replace("TODO-owner-group", f"{name}-admins").replace("TODO-cost-center", "cc-4100")
    tenant.write_text(text)
    assert _errors(team / "stacks" / stack / "spec.yaml") == []


def test_tenant_yaml_examples_validate_in_the_scaffold(team):
    tenants = [(page, body) for page, body in _blocks("yaml") if re.search(r"^gpus:", body, re.M)]
    for page, body in tenants:
        data = yaml.safe_load(body)
        path = team / "stacks" / "dev" / "tenants" / f"{data['name']}.yaml"
        path.write_text(body)
        assert _errors(team / "stacks" / "dev" / "spec.yaml") == [], page
        path.unlink()


def test_monitoring_examples_validate_in_the_scaffold(team):
    blocks = [(page, body) for page, body in _blocks("yaml") if body.startswith("monitoring:")]
    assert any(page == "monitoring-and-usage.md" for page, _ in blocks)
    spec = team / "stacks" / "dev" / "spec.yaml"
    scaffolded = spec.read_text()
    for page, body in blocks:
        spec.write_text(scaffolded + "\n" + body)
        assert _errors(spec) == [], page
        assert yaml.safe_load(spec.read_text())["monitoring"]["enabled"] is True


def test_the_monitoring_howto_names_usage_flags_that_exist(capsys):
    with pytest.raises(SystemExit):
        main(["usage", "--help"])
    help_text = capsys.readouterr().out
    text = (HOWTO / "monitoring-and-usage.md").read_text(encoding="utf-8")
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", text))
    usage_flags = {f for f in flags if f not in ("--metric-labels-allowlist", "--stack", "--output-dir")}
    assert {"--basic-auth-file", "--bearer-token-file", "--ca-file", "--timeout", "--max-response-size"} <= usage_flags
    missing = sorted(f for f in usage_flags if f not in help_text)
    assert not missing, missing
