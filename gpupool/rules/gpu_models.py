"""GP25x: GPU model names in node pools (one lookup for every command: gpupool.gpu.models.resolve_gpu)."""

from __future__ import annotations

from gpupool.rules.registry import Context, rule


@rule("GP250", "a whole-GPU pool names a GPU model gpupool does not know")
def unknown_whole_gpu_model(ctx: Context) -> None:
    """A pool without MIG may name any GPU (gpupool needs no geometry for it), but a name that is neither in
    the MIG catalog nor among the known whole-GPU models (`gpupool mig models`) is most often a typo; it shows
    up in the plan, and pools meant to be the same model are priced and reported apart. A warning with a
    did-you-mean (an error under `validate --strict`); MIG pools are judged by GP202.

    Passes:
        nodePools:
          - {name: l40s, gpu: L40S, gpusPerNode: 4, nodes: [n1], sharing: {timeSlicing: {replicas: 2}}}
    Fails:
        nodePools:
          - {name: l40s, gpu: L40SX, gpusPerNode: 4, nodes: [n1], sharing: {timeSlicing: {replicas: 2}}}
    """
    from gpupool.gpu.models import resolve_gpu

    pools = ctx.data.get("nodePools") if isinstance(ctx.data, dict) else None
    if not isinstance(pools, list):
        return
    for i, pool in enumerate(pools):
        path = ("nodePools", i, "gpu")
        if not isinstance(pool, dict) or not isinstance(pool.get("gpu"), str) or not ctx.usable(path):
            continue
        sharing = pool.get("sharing")
        if isinstance(sharing, dict) and "mig" in sharing:
            continue  # GP202
        found = resolve_gpu(pool["gpu"])
        if found.gpu is not None:
            continue
        guess = f" (did you mean {found.suggestion}?)" if found.suggestion else ""
        # the name is not quoted back: it is untrusted input, and the location says where it is
        ctx.warn(
            path,
            f"this is not a GPU model gpupool knows{guess}; `gpupool mig models` lists the known "
            "models and the GFD product names accepted for them",
        )
