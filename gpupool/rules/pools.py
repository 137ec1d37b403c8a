"""GP2xx: node pools, their nodes, and their MIG layouts.

Most of these decide whether a pool can be built at all, so they run inside the model builder
(gpupool/model/build.py) and are declared here with their documentation. Examples replace the top-level
keys of the base spec shown in docs/reference/rules.md.
"""

from __future__ import annotations

from gpupool.model import build as B
from gpupool.rules.registry import Context, declare, rule

declare(
    B.DUPLICATE_POOL,
    "two node pools have the same name",
    """
Pool names name the MIG and device-plugin configs; the second pool of a name is not counted.

Passes:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1]}
      - {name: l4-b, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-2]}
Fails:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1]}
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-2]}
""",
)

declare(
    B.MIG_MODEL,
    "a MIG pool names a GPU model without MIG",
    """
A pool with `sharing.mig` needs a GPU model from the MIG catalog (names, aliases and GFD product strings are
accepted, with a did-you-mean hint).

Passes:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {preset: all-balanced}}}
Fails:
    nodePools:
      - {name: a100, gpu: A100-80, gpusPerNode: 4, nodes: [n1], sharing: {mig: {preset: all-balanced}}}
""",
)

declare(
    B.NO_NODES,
    "a pool selects no nodes",
    """
A pool lists its `nodes` by name or selects them by `nodeSelector`; with neither, it has no capacity.

Passes:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1]}
Fails:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4}
""",
)

declare(
    B.SELECTOR_COUNT,
    "a nodeSelector pool has no nodeCount",
    """
Capacity checks need to know how many nodes a selected node group has.

Passes:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodeSelector: {pool: l4}, nodeCount: 1}
Fails:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodeSelector: {pool: l4}}
""",
)

declare(
    B.COUNT_BELOW_NODES,
    "nodeCount is below the nodes listed",
    """
`nodeCount` may count nodes that are not listed (a group that grows), never fewer than are listed.

Passes:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1], nodeCount: 1}
Fails:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1, gpu-l4-2], nodeCount: 1}
""",
)

declare(
    B.NODE_TWICE,
    "a node is listed twice in a pool",
    """
Passes:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1]}
Fails:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1, gpu-l4-1]}
""",
)

declare(
    B.NODE_IN_TWO_POOLS,
    "a node is in two pools",
    """
A node carries one MIG config and one device-plugin config, so it belongs to one pool.

Passes:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1]}
      - {name: l4-b, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-2]}
Fails:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1]}
      - {name: l4-b, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1]}
""",
)

declare(
    B.MIG_FORM,
    "a MIG block gives not exactly one of layout, preset, perGpu",
    """
Passes:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {preset: all-balanced}}}
Fails:
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 4
        nodes: [n1]
        sharing: {mig: {preset: all-balanced, layout: {7g.80gb: 1}}}
""",
)

declare(
    B.GPU_INDEX_RANGE,
    "a perGpu index does not exist on the node",
    """
`perGpu[].gpus` are GPU indices 0..gpusPerNode-1.

Passes:
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 4
        nodes: [n1]
        sharing: {mig: {perGpu: [{gpus: [0, 1, 2, 3], preset: all-balanced}]}}
Fails:
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 4
        nodes: [n1]
        sharing: {mig: {perGpu: [{gpus: [4], preset: all-balanced}]}}
""",
)

declare(
    B.GPU_INDEX_TWICE,
    "a GPU index has two perGpu layouts",
    """
Passes:
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 4
        nodes: [n1]
        sharing: {mig: {perGpu: [{gpus: [0, 1], preset: all-balanced}, {gpus: [2, 3], preset: all-7g.80gb}]}}
Fails:
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 4
        nodes: [n1]
        sharing: {mig: {perGpu: [{gpus: [0, 1], preset: all-balanced}, {gpus: [1, 2], preset: all-7g.80gb}]}}
""",
)

declare(
    B.PER_GPU_FORM,
    "a perGpu entry gives not exactly one of layout, preset",
    """
Passes:
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 4
        nodes: [n1]
        sharing: {mig: {perGpu: [{gpus: [0, 1, 2, 3], preset: all-balanced}]}}
Fails:
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 4
        nodes: [n1]
        sharing: {mig: {perGpu: [{gpus: [0, 1, 2, 3], preset: all-balanced, layout: {7g.80gb: 1}}]}}
""",
)

declare(
    B.UNKNOWN_PRESET,
    "a MIG preset is not one NVIDIA ships for the model",
    """
Presets are those of NVIDIA's default mig-parted config for the model (with a did-you-mean hint).

Passes:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {preset: all-balanced}}}
Fails:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {preset: all-balance}}}
""",
)

declare(
    B.COMPUTE_INSTANCE,
    "a MIG layout names a compute-instance profile",
    """
`1c.2g.20gb` splits a GPU instance into compute instances, which the device plugin cannot advertise: pods
could never request them. Use the whole-instance profile.

Passes:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {layout: {2g.20gb: 1}}}}
Fails:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {layout: {1c.2g.20gb: 1}}}}
""",
)

declare(
    B.UNKNOWN_PROFILE,
    "a MIG layout names a profile the model does not have",
    """
Profiles differ per model (A100-40GB has 3g.20gb, A100-80GB 3g.40gb); the hint names the closest one.

Passes:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {layout: {3g.40gb: 2}}}}
Fails:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {layout: {3g.20gb: 2}}}}
""",
)

declare(
    B.ALL_ZERO,
    "a MIG layout has no instance",
    """
Passes:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {layout: {7g.80gb: 1}}}}
Fails:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {layout: {7g.80gb: 0}}}}
""",
)

declare(
    B.LAYOUT_FIT,
    "a MIG layout does not fit one GPU",
    """
Every GPU instance must start at one of its profile's allowed memory slots without overlapping another,
within the model's instance and compute-slice limits; the message says what would fit. A layout that fits
but that mig-parted's own enumerator may refuse (a +me instance beside another 1g one) is a warning.

Passes:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {layout: {3g.40gb: 2}}}}
Fails:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {layout: {1g.10gb: 8}}}}
""",
)


@rule("GP219", "some GPUs of a perGpu pool have no MIG layout")
def uncovered_gpus(ctx: Context) -> None:
    """GPUs that no `perGpu` entry names stay whole GPUs (MIG disabled) and are advertised as nvidia.com/gpu;
    that is allowed, and often an oversight (a warning).

    Passes:
        nodePools:
          - name: a100
            gpu: A100-80GB
            gpusPerNode: 4
            nodes: [n1]
            sharing: {mig: {perGpu: [{gpus: [0, 1, 2, 3], preset: all-balanced}]}}
    Fails:
        nodePools:
          - name: a100
            gpu: A100-80GB
            gpusPerNode: 4
            nodes: [n1]
            sharing: {mig: {perGpu: [{gpus: [0, 1], preset: all-balanced}]}}
    """
    from gpupool.model.platform import whole_gpu_indices

    if ctx.built is None:
        return
    for path, gpus_per_node, groups in ctx.built.per_gpu:
        uncovered = whole_gpu_indices(gpus_per_node, groups)
        if uncovered:
            ctx.warn(
                path + ("perGpu",),
                f"GPUs {uncovered} have no MIG layout: they stay whole GPUs "
                "(MIG disabled) and are advertised as nvidia.com/gpu",
            )
