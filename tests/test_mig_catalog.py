"""The packaged MIG catalog against the reference tables (gpu-sharing.md sections 2.2, 3.1, 4.2)."""

from fractions import Fraction

import pytest

from gpupool.gpu.mig import GpuModel, catalog, check_layout, gpu_fraction, resolve_preset

# Reference 3.1 "Names per GPU", columns: 1g, 1g+me, 1g (2x mem), 2g, 3g, 4g, 7g — copied, not derived.
REFERENCE_NAMES = {
    "A100-40GB": "1g.5gb 1g.5gb+me 1g.10gb 2g.10gb 3g.20gb 4g.20gb 7g.40gb",
    "A100-80GB": "1g.10gb 1g.10gb+me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "H100-80GB": "1g.10gb 1g.10gb+me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "H100-94GB": "1g.12gb 1g.12gb+me 1g.24gb 2g.24gb 3g.47gb 4g.47gb 7g.94gb",
    "H100-96GB": "1g.12gb 1g.12gb+me 1g.24gb 2g.24gb 3g.48gb 4g.48gb 7g.96gb",
    "H20": "1g.12gb 1g.12gb+me 1g.24gb 2g.24gb 3g.48gb 4g.48gb 7g.96gb",
    "H200-141GB": "1g.18gb 1g.18gb+me 1g.35gb 2g.35gb 3g.71gb 4g.71gb 7g.141gb",
    "GH200-144GB": "1g.18gb 1g.18gb+me 1g.36gb 2g.36gb 3g.72gb 4g.72gb 7g.144gb",
    "B200-180GB": "1g.23gb 1g.23gb+me 1g.45gb 2g.45gb 3g.90gb 4g.90gb 7g.180gb",
    "GB200-186GB": "1g.23gb 1g.23gb+me 1g.47gb 2g.47gb 3g.93gb 4g.93gb 7g.186gb",
    "B300": "1g.34gb 1g.34gb+me 1g.67gb 2g.67gb 3g.135gb 4g.135gb 7g.269gb",
    "GB300": "1g.35gb 1g.35gb+me 1g.70gb 2g.70gb 3g.139gb 4g.139gb 7g.278gb",
}
# (SM slices, memory slices, max, starts) of the 8-slice classes, same column order (reference 3.1 table).
EIGHT_SLICE = [
    (1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
    (1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
    (1, 2, 4, (0, 2, 4, 6)),
    (2, 2, 3, (0, 2, 4)),
    (3, 4, 2, (0, 4)),
    (4, 4, 1, (0,)),
    (7, 8, 1, (0,)),
]

# Reference 2.2 all-balanced per device.
BALANCED = {
    "A100-40GB": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    "A100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-94GB": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
    "H100-96GB": {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
    "H20": {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
    "H200-141GB": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    "GH200-144GB": {"1g.18gb": 2, "2g.36gb": 1, "3g.72gb": 1},
    "B200-180GB": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
    "GB200-186GB": {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1},
    "B300": {"1g.34gb": 2, "2g.67gb": 1, "3g.135gb": 1},
    "GB300": {"1g.35gb": 2, "2g.70gb": 1, "3g.139gb": 1},
    "A30-24GB": {"1g.6gb": 2, "2g.12gb": 1},
    "RTX-PRO-6000": {"1g.24gb": 2, "2g.48gb": 1},
}

# Reference 2.2 single-profile preset examples.
PRESETS = [
    ("A100-40GB", "all-1g.5gb", {"1g.5gb": 7}),
    ("A100-40GB", "all-2g.10gb", {"2g.10gb": 3}),
    ("A100-40GB", "all-3g.20gb", {"3g.20gb": 2}),
    ("A100-40GB", "all-4g.20gb", {"4g.20gb": 1}),
    ("A100-40GB", "all-7g.40gb", {"7g.40gb": 1}),
    ("A100-40GB", "all-1g.10gb", {"1g.10gb": 4}),
    ("H100-80GB", "all-1g.10gb", {"1g.10gb": 7}),
    ("H100-80GB", "all-1g.20gb", {"1g.20gb": 4}),
    ("H100-80GB", "all-2g.20gb", {"2g.20gb": 3}),
    ("H100-80GB", "all-3g.40gb", {"3g.40gb": 2}),
    ("H100-80GB", "all-1g.10gb.me", {"1g.10gb+me": 1}),
    ("H100-80GB", "all-1g.10gb+me", {"1g.10gb+me": 1}),
    ("A30-24GB", "all-1g.6gb", {"1g.6gb": 4}),
    ("A30-24GB", "all-2g.12gb", {"2g.12gb": 2}),
    ("A30-24GB", "all-4g.24gb", {"4g.24gb": 1}),
    ("H200-141GB", "all-1g.18gb", {"1g.18gb": 7}),
    ("H200-141GB", "all-1g.35gb", {"1g.35gb": 4}),
    ("H200-141GB", "ALL-7G.141GB", {"7g.141gb": 1}),
    ("B200-180GB", "all-1g.23gb", {"1g.23gb": 7}),
    ("B200-180GB", "all-1g.45gb", {"1g.45gb": 4}),
    ("B200-180GB", "all-3g.90gb", {"3g.90gb": 2}),
    ("GB200-186GB", "all-1g.47gb", {"1g.47gb": 4}),
    ("GB200-186GB", "all-2g.47gb", {"2g.47gb": 3}),
    ("B300", "all-7g.269gb", {"7g.269gb": 1}),
    ("GB300", "all-7g.278gb", {"7g.278gb": 1}),
    ("RTX-PRO-6000", "all-1g.24gb", {"1g.24gb": 4}),
    ("RTX-PRO-6000", "all-2g.48gb", {"2g.48gb": 2}),
    ("RTX-PRO-6000", "all-4g.96gb", {"4g.96gb": 1}),
    ("RTX-PRO-6000", "all-1g.24gb.gfx", {"1g.24gb+gfx": 4}),
]

ALIASES = [
    ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA-A100-PCIE-40GB", "A100-40GB"),
    ("NVIDIA-A100-SXM4-80GB", "A100-80GB"),
    ("NVIDIA-A100-80GB-PCIe", "A100-80GB"),
    ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
    ("NVIDIA-H100-PCIe", "H100-80GB"),
    ("NVIDIA-H100-NVL", "H100-94GB"),
    ("NVIDIA-H200", "H200-141GB"),
    ("NVIDIA-H200-NVL", "H200-141GB"),
    ("NVIDIA-B200", "B200-180GB"),
    ("NVIDIA-GH200-480GB", "H100-96GB"),
    ("NVIDIA-H20", "H20"),
    ("NVIDIA-GH200-144G-HBM3e", "GH200-144GB"),
    ("NVIDIA-GB200", "GB200-186GB"),
    ("NVIDIA-A30", "A30-24GB"),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX-PRO-6000"),
    # friendly names, case and spacing
    ("H200-141GB", "H200-141GB"),
    ("A30-24GB", "A30-24GB"),
    ("A100-80GB", "A100-80GB"),
    ("RTX-PRO-6000", "RTX-PRO-6000"),
    ("RTX PRO 6000", "RTX-PRO-6000"),
    ("rtx pro 6000", "RTX-PRO-6000"),
    ("nvidia-h100-80gb-hbm3", "H100-80GB"),
    ("NVIDIA H100 80GB HBM3", "H100-80GB"),
    ("  b200-180gb ", "B200-180GB"),
    # GFD decorations: -SHARED with time-slicing, -MIG-<profile> under the single strategy (reference 1.4)
    ("NVIDIA-A100-SXM4-40GB-SHARED", "A100-40GB"),
    ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-40GB"),
    ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED", "H100-80GB"),
]


def test_all_models_present():
    assert set(catalog().names()) == set(REFERENCE_NAMES) | {"A30-24GB", "RTX-PRO-6000"}


@pytest.mark.parametrize("model_name,names", sorted(REFERENCE_NAMES.items()))
def test_eight_slice_models_match_reference(model_name, names):
    m = catalog().models[model_name]
    assert (m.compute_slices, m.memory_slices, m.max_instances) == (7, 8, 7)
    assert list(m.profiles) == names.split()
    for name, (c, mem, mx, starts) in zip(names.split(), EIGHT_SLICE):
        p = m.profiles[name]
        assert (p.compute, p.memory, p.max_count, p.starts) == (c, mem, mx, starts), name


def test_four_slice_models_match_reference():
    a30 = catalog().models["A30-24GB"]
    assert (a30.compute_slices, a30.memory_slices, a30.max_instances) == (4, 4, 4)
    table = {
        "1g.6gb": (1, 1, 4, (0, 1, 2, 3)),
        "1g.6gb+me": (1, 1, 1, (0, 1, 2, 3)),
        "2g.12gb": (2, 2, 2, (0, 2)),
        "2g.12gb+me": (2, 2, 1, (0, 2)),
        "4g.24gb": (4, 4, 1, (0,)),
    }
    assert {n: (p.compute, p.memory, p.max_count, p.starts) for n, p in a30.profiles.items()} == table
    rtx = catalog().models["RTX-PRO-6000"]
    assert rtx.memory_gb == 96 and rtx.placements == "unverified"
    assert {
        "1g.24gb",
        "1g.24gb+me",
        "1g.24gb+me.all",
        "1g.24gb+gfx",
        "1g.24gb-me",
        "2g.48gb",
        "2g.48gb+gfx",
        "2g.48gb-me",
        "2g.48gb+me.all",
        "4g.96gb",
        "4g.96gb+gfx",
    } == set(rtx.profiles)
    assert rtx.profiles["1g.24gb+gfx"].max_count == 4 and rtx.profiles["2g.48gb-me"].max_count == 2


@pytest.mark.parametrize("model_name,layout", sorted(BALANCED.items()))
def test_all_balanced(model_name, layout):
    assert resolve_preset(catalog().models[model_name], "all-balanced") == layout


@pytest.mark.parametrize("model_name,preset,layout", PRESETS)
def test_single_profile_presets(model_name, preset, layout):
    assert resolve_preset(catalog().models[model_name], preset) == layout


def test_unknown_preset_is_none():
    assert resolve_preset(catalog().models["H100-80GB"], "all-1g.5gb") is None


@pytest.mark.parametrize("model_name", sorted(BALANCED))
def test_every_preset_fits(model_name):
    m = catalog().models[model_name]
    assert len(m.presets) == len(m.profiles) + 1
    for name, layout in m.presets.items():
        result = check_layout(m, layout)
        assert result.ok, (name, result.reasons)


@pytest.mark.parametrize("alias,expected", ALIASES)
def test_alias_resolution(alias, expected):
    model = catalog().resolve(alias)
    assert model is not None and model.name == expected


@pytest.mark.parametrize("name", ["", "NVIDIA-T4", "H100", "A100", "1g.10gb", "NVIDIA-", "B200-180GB-extra"])
def test_unknown_models(name):
    assert catalog().resolve(name) is None


@pytest.mark.parametrize(
    "model_name,profile,resource",
    [
        ("H100-80GB", "1g.10gb", "nvidia.com/mig-1g.10gb"),
        ("H100-80GB", "1g.10gb+me", "nvidia.com/mig-1g.10gb.me"),
        ("RTX-PRO-6000", "1g.24gb+gfx", "nvidia.com/mig-1g.24gb.gfx"),
        ("RTX-PRO-6000", "2g.48gb+me.all", "nvidia.com/mig-2g.48gb.me.all"),
        ("RTX-PRO-6000", "1g.24gb-me", "nvidia.com/mig-1g.24gb-me"),
    ],
)
def test_resource_names(model_name, profile, resource):
    assert catalog().models[model_name].profiles[profile].resource_name == resource


@pytest.mark.parametrize(
    "profile,is_me",
    [
        ("1g.24gb+me", True),
        ("1g.24gb+me.all", True),
        ("2g.48gb+me.all", True),
        ("1g.24gb-me", False),
        ("1g.24gb+gfx", False),
        ("4g.96gb", False),
    ],
)
def test_media_extension(profile, is_me):
    assert catalog().models["RTX-PRO-6000"].profiles[profile].is_media_extension is is_me


@pytest.mark.parametrize(
    "model_name,profile,fraction",
    [
        ("H100-80GB", "3g.40gb", Fraction(3, 7)),
        ("H100-80GB", "7g.80gb", Fraction(1)),
        ("H100-80GB", "1g.20gb", Fraction(1, 7)),
        ("A30-24GB", "2g.12gb", Fraction(1, 2)),
        ("RTX-PRO-6000", "1g.24gb", Fraction(1, 4)),
    ],
)
def test_gpu_fraction(model_name, profile, fraction):
    assert gpu_fraction(catalog().models[model_name], profile) == fraction


def test_gpu_fraction_unknown_profile():
    with pytest.raises(ValueError, match="valid: 1g.6gb"):
        gpu_fraction(catalog().models["A30-24GB"], "1g.10gb")


def test_provenance_recorded():
    for m in catalog().models.values():
        assert isinstance(m, GpuModel) and hash(m) == hash(m.name)
        assert m.placements in {"verified", "inferred", "unverified"}, m.name
        assert "reference" in m.source, m.name
        assert m.memory_gb > 0 and m.device_ids
    # the reference confirms -lgipp only for these
    assert {m.name for m in catalog().models.values() if m.placements == "verified"} == {
        "A100-40GB",
        "H100-80GB",
        "H100-94GB",
        "A30-24GB",
    }


def test_catalog_is_cached():
    assert catalog() is catalog()


def test_alias_collision_rejected():
    from gpupool.gpu.mig import Catalog

    a = catalog().models["A30-24GB"]
    b = catalog().models["H20"]
    clash = GpuModel(
        b.name, ("NVIDIA-A30",), b.memory_gb, b.compute_slices, b.memory_slices, b.max_instances, b.profiles, b.presets
    )
    with pytest.raises(ValueError, match="names both"):
        Catalog({a.name: a, clash.name: clash})
