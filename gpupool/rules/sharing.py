"""GP3xx: how a pool shares its GPUs (MIG, time-slicing, MPS) and what the device plugin accepts.

These decide whether a pool's sharing can be built, so they run inside the model builder and are declared
here with their documentation.
"""

from __future__ import annotations

from gpupool.model import build as B
from gpupool.rules.registry import declare

declare(
    B.MIG_NEEDS_MIXED,
    'MIG pools need cluster.migStrategy "mixed"',
    """
Under `mixed` each MIG profile is advertised as its own resource (nvidia.com/mig-1g.10gb), which is what
tenant quotas name; `none` would advertise no MIG devices.

Passes:
    cluster: {name: dev, migStrategy: mixed}
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {preset: all-balanced}}}
Fails:
    cluster: {name: dev, migStrategy: none}
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {preset: all-balanced}}}
""",
)

declare(
    B.TS_AND_MPS,
    "a pool uses both timeSlicing and mps",
    """
The device plugin takes one sharing strategy per config.

Passes:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {timeSlicing: {replicas: 4}}}
Fails:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {timeSlicing: {replicas: 4}, mps: {replicas: 4}}}
""",
)

declare(
    B.MPS_WITH_MIG,
    "MPS on MIG instances",
    """
The device plugin rejects it ("sharing using MPS is not supported for MIG devices"); time-slicing works
with MIG.

Passes:
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 4
        nodes: [n1]
        sharing: {mig: {preset: all-balanced}, timeSlicing: {replicas: 2}}
Fails:
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 4
        nodes: [n1]
        sharing: {mig: {preset: all-balanced}, mps: {replicas: 2}}
""",
)

declare(
    B.MPS_UNDER_MIXED,
    'MPS under cluster.migStrategy "mixed"',
    """
The GPU Operator passes the MIG strategy to every device plugin, which then refuses MPS ("using
--mig-strategy=mixed is not supported with MPS"): MPS needs `migStrategy: none`, so no MIG pools.

Passes:
    cluster: {name: dev, migStrategy: none}
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {mps: {replicas: 4}}}
Fails:
    cluster: {name: dev}
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {mps: {replicas: 4}}}
""",
)
