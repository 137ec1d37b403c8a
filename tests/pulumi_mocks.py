"""Run the real gpupool Pulumi program under Pulumi's mocks and collect what it registers."""

from __future__ import annotations

import json

import pulumi


class CollectingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.created: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.created.append(args)
        if args.typ == "pulumi-python:dynamic/gpupool:TierPriority":
            # Its outputs as in `up` (the provider is pure); in a real preview that changes a tier's priority they
            # are unknown (gpupool.deploy.tier_priority_provider says why).
            from gpupool.deploy.tier_priority_provider import TierPriorityProvider

            created = TierPriorityProvider().create(dict(args.inputs))
            return created.id, dict(created.outs or {})
        return (f"{args.name}-id" if args.custom else None), dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class RecordingMonitor(pulumi.runtime.mocks.MockMonitor):
    """Also records what Mocks.new_resource does not see: parent, options and dependencies."""

    def __init__(self, mocks: CollectingMocks) -> None:
        super().__init__(mocks)
        self.requests: dict[str, dict] = {}  # "type::name" -> request facts

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        self.requests[f"{request.type}::{request.name}"] = {
            "type": request.type,
            "urn": response.urn,
            "parent": request.parent,
            "retainOnDelete": request.retainOnDelete if request.HasField("retainOnDelete") else None,
            "protect": request.protect if request.HasField("protect") else None,
            "dependencies": list(request.dependencies),
            "provider": request.provider,
            "aliases": list(request.aliasURNs) + [a.urn for a in request.aliases if a.urn],
            "ignoreChanges": list(request.ignoreChanges),
            "replaceOnChanges": list(request.replaceOnChanges),
            "deleteBeforeReplace": request.deleteBeforeReplace,
            "customTimeouts": (
                {"create": request.customTimeouts.create, "update": request.customTimeouts.update}
                if request.HasField("customTimeouts")
                else None
            ),
        }
        return response


def run_program(
    config: dict[str, str], stack: str = "test", preview: bool = True, program=None, project: str = "gpupool"
):
    """Run components.program.main() (or PROGRAM) under mocks, in Pulumi project PROJECT, with CONFIG's keys
    in gpupool's namespace unless they name one. Returns (mocks, monitor, error)."""
    mocks = CollectingMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview, monitor=monitor)
    # a key given with its namespace (`team:spec`) is passed as is
    pulumi.runtime.set_all_config({(k if ":" in k else f"gpupool:{k}"): v for k, v in config.items()})
    error: list[BaseException] = []

    @pulumi.runtime.test
    def _run():
        if program is not None:
            return program()
        from components.program import main

        main()

    try:
        _run()
    except Exception as exc:  # the program's own failure (e.g. RunError on an invalid spec)
        error.append(exc)
    return mocks, monitor, (error[0] if error else None)


def snapshot(mocks: CollectingMocks) -> list[dict]:
    """(type, name, inputs) of everything registered, sorted: the golden-file form."""
    rows = [{"type": a.typ, "name": a.name, "inputs": a.inputs} for a in mocks.created]
    return sorted(rows, key=lambda r: (r["type"], r["name"]))


def canonical(data) -> str:
    return json.dumps(data, indent=1, sort_keys=True, default=str)
