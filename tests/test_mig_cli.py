"""`gpupool mig ...` through gpupool.cli.main: exit codes 0/1/2, messages, no tracebacks."""

import re

import pytest
import yaml

from gpupool.cli.main import main


def run(capsys, *argv):
    code = main(["mig", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def _slice_cells(out):
    """The ASCII map's cells: one label per instance (a label spans its memory slices)."""
    line = next(l for l in out.splitlines() if l.startswith("[") and l.endswith("]"))
    return [c.strip() for c in line[1:-1].split("|")]


@pytest.mark.parametrize(
    "argv,cells",
    [
        (["--gpu", "NVIDIA-H100-80GB-HBM3", "1g.10gb=4", "3g.40gb=1"], ["1g.10gb"] * 4 + ["3g.40gb"]),
        (["--gpu", "A100-40GB", "7g.40gb=1"], ["7g.40gb"]),
        (["--gpu", "NVIDIA-A30", "1g.6gb=2"], ["1g.6gb", "1g.6gb", "-", "-"]),
        (["--gpu", "rtx pro 6000", "2g.48gb=1", "1g.24gb=2"], None),
        (["--gpu", "B200-180GB", "all-balanced"], None),
        (["--gpu", "H100-80GB", "all-1g.10gb"], ["1g.10gb"] * 7 + ["-"]),
    ],
)
def test_check_fits(capsys, argv, cells):
    code, out, err = run(capsys, "check", *argv)
    assert code == 0, err
    assert "fits one GPU" in out
    starts = [int(s) for s in re.findall(r"start (\d+)", out)]
    assert starts == sorted(starts) and len(starts) >= 1
    if cells is not None:
        assert _slice_cells(out) == cells


def test_check_inferred_placement_note(capsys):
    code, out, _ = run(capsys, "check", "--gpu", "B200-180GB", "1g.23gb=1")
    assert code == 0 and "inferred" in out
    code, out, _ = run(capsys, "check", "--gpu", "H100-80GB", "1g.10gb=1")
    assert code == 0 and "note:" not in out


def test_check_warning_on_stderr(capsys):
    code, out, err = run(capsys, "check", "--gpu", "H100-80GB", "1g.10gb+me=1", "1g.10gb=1")
    assert code == 0 and "warning:" in err and "mig-parted" in err


@pytest.mark.parametrize(
    "argv,pattern",
    [
        (["--gpu", "H100-80GB", "3g.40gb=2", "1g.10gb=1"], r"needs 9 memory slices"),
        (["--gpu", "H100-80GB", "4g.40gb=1", "2g.20gb=2"], r"would fit: 4g\.40gb \+ 2g\.20gb"),
        (["--gpu", "H100-80GB", "1c.2g.20gb=1"], r"device plugin"),
        (["--gpu", "H100-80GB", "1g.10gb=0"], r"empty"),
        (["--gpu", "RTX-PRO-6000", "4g.96gb=1", "4g.96gb+gfx=1"], r"compute slices"),
    ],
)
def test_check_does_not_fit(capsys, argv, pattern):
    code, out, err = run(capsys, "check", *argv)
    assert code == 1
    assert err.startswith("error: ") and re.search(pattern, err), err
    assert out == ""


@pytest.mark.parametrize(
    "argv,pattern",
    [
        (
            ["--gpu", "NVIDIA-T4", "1g.10gb=1"],
            r"T4 has no MIG: it is a whole-GPU model.*MIG models: A100-40GB, .*RTX-PRO-6000",
        ),
        (["--gpu", "H100-80G-X", "1g.10gb=1"], r"unknown GPU model 'H100-80G-X' \(did you mean H100-80GB\?\)"),
        # an unknown profile is a usage error too (2), with the model's profiles and a did-you-mean
        (
            ["--gpu", "A100-40GB", "1g.20gb=1"],
            r"not a MIG profile of A100-40GB: 1g\.20gb \(did you mean 1g\.10gb\?\); profiles: 1g\.5gb",
        ),
        (["--gpu", "A30-24GB", "1g.10gb=1"], r"not a MIG profile of A30-24GB: 1g\.10gb.*profiles: 1g\.6gb"),
        (["--gpu", "H100-80GB", "1g.10gb=x"], r"non-negative integer"),
        (["--gpu", "H100-80GB", "=3"], r"expected PROFILE=COUNT"),
        (["--gpu", "H100-80GB", "1g.10gb=-1"], r"non-negative integer"),
        (["--gpu", "H100-80GB", "1g.10gb="], r"non-negative integer"),
        (["--gpu", "H100-80GB", "1g.10gb=1", "1g.10gb=2"], r"given twice"),
        (["--gpu", "H100-80GB", "all-unbalanced"], r"neither PROFILE=COUNT nor a preset.*all-balanced"),
        (["--gpu", "H100-80GB", "1g.10gb"], r"neither PROFILE=COUNT nor a preset"),
        (["--gpu", "H100-80GB", "1g.10gb=1", "3g.40gb"], r"expected PROFILE=COUNT"),
    ],
)
def test_check_usage_errors(capsys, argv, pattern):
    code, out, err = run(capsys, "check", *argv)
    assert code == 2
    assert err.startswith("error: ") and re.search(pattern, err), err


def test_missing_gpu_is_argparse_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["mig", "check", "1g.10gb=1"])
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_profiles_table(capsys):
    code, out, err = run(capsys, "profiles", "--gpu", "NVIDIA-H100-80GB-HBM3")
    assert code == 0
    lines = out.splitlines()
    header = next(i for i, l in enumerate(lines) if l.startswith("PROFILE"))
    rows = lines[header + 1 : header + 8]
    assert [r.split()[0] for r in rows] == [
        "1g.10gb",
        "1g.10gb+me",
        "1g.20gb",
        "2g.20gb",
        "3g.40gb",
        "4g.40gb",
        "7g.80gb",
    ]
    me = rows[1].split()
    assert me[1] == "nvidia.com/mig-1g.10gb.me" and me[-1] == "1/7" and me[4] == "1"
    assert rows[4].split()[1:] == ["nvidia.com/mig-3g.40gb", "3", "4", "2", "0,4", "3/7"]
    # columns are aligned: every row's resource column starts where the header's does
    col = lines[header].index("RESOURCE")
    assert all(r[col:].startswith("nvidia.com/") for r in rows)
    assert "all-balanced" in out and "all-1g.10gb.me" in out


def test_profiles_unknown_model(capsys):
    code, _, err = run(capsys, "profiles", "--gpu", "V100")
    assert code == 2 and "known models" in err


def test_suggest_single_layout_fragment(capsys):
    code, out, err = run(capsys, "suggest", "--gpu", "H100-80GB", "1g.10gb=20", "2g.20gb=10", "3g.40gb=10")
    assert code == 0, err
    assert re.search(r"10 GPUs needed \(proven minimum; resource lower bound 10; solved by HiGHS in [\d.]+ m?s\)", out)
    fragment = out[out.index("sharing:") :]
    assert yaml.safe_load(fragment) == {"sharing": {"mig": {"layout": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}}}


def test_suggest_per_node_fragment(capsys):
    code, out, err = run(
        capsys, "suggest", "--gpu", "H100-80GB", "--gpus-per-node", "8", "1g.10gb=200", "3g.40gb=50", "2g.20gb=70"
    )
    assert code == 0, err
    assert "70 GPUs needed" in out and "10 nodes" in out
    frag = yaml.safe_load(out[out.index("sharing:") :])
    assert sorted(i for g in frag["sharing"]["mig"]["perGpu"] for i in g["gpus"]) == list(range(8))


def test_suggest_several_layouts_without_nodes(capsys):
    code, out, _ = run(capsys, "suggest", "--gpu", "H100-80GB", "4g.40gb=3", "2g.20gb=6")
    assert code == 0
    assert out.count("sharing:") == 2 and "--gpus-per-node" in out


@pytest.mark.parametrize(
    "argv,code,pattern",
    [
        (["--gpu", "H100-80GB", "1g.12gb=3"], 2, r"did you mean 1g\.10gb.*Valid profiles"),  # unknown profile: usage
        (["--gpu", "Quadro", "1g.10gb=3"], 2, r"unknown GPU model"),
        (["--gpu", "H100-80GB", "1g.10gb=three"], 2, r"non-negative integer"),
        (["--gpu", "H100-80GB", "--gpus-per-node", "0", "1g.10gb=3"], 2, r"--gpus-per-node must be between 1 and 64"),
        (
            ["--gpu", "H100-80GB", "1g.10gb=100000000000"],
            2,
            r"needs at least 14285714286 H100-80GB GPUs; no Kubernetes "
            r"cluster holds more than 320,000",
        ),
        (["--gpu", "H100-80GB", "1g.10gb=" + "9" * 30], 2, r"30 digits: more instances than any cluster holds"),
        (["--gpu", "H100-80GB", "--gpus-per-node", "1", "7g.80gb=1", "4g.40gb=1"], 1, r"node pools"),
    ],
)
def test_suggest_errors(capsys, argv, code, pattern):
    got, _, err = run(capsys, "suggest", *argv)
    assert got == code and err.startswith("error: ") and re.search(pattern, err), err


def test_suggest_zero_demand(capsys):
    code, out, _ = run(capsys, "suggest", "--gpu", "A30-24GB", "1g.6gb=0")
    assert code == 0 and "nothing to place" in out
