"""The program hands the SDK's final wait its registrations, not thousands of pending outputs.

components.program.wait_for_registrations_linearly exists because pulumi's ``wait_for_rpcs`` only awaits
the registration RPCs already in flight when the program returns, and otherwise falls back to a loop that
re-waits on every pending Output after each finished registration (quadratic in the stack size; measured
with bench/bench_e2e.py, docs/explanation/scale.md). This runs the program the way the language host and the
Automation API do (``run_in_stack``, not the mocks' ``pulumi.runtime.test``, which never runs the async
entry point) against the mock monitor, and checks how many registrations are in flight at that moment.
It reads SDK internals on purpose: if a pulumi upgrade changes them, this test is where it shows.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pulumi
import pytest
import yaml
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime import stack as pulumi_stack

import components.program as program
from tests.pulumi_mocks import CollectingMocks, RecordingMonitor

ROOT = Path(__file__).resolve().parent.parent


def _in_flight_when_program_returns(spec: Path, monkeypatch, *, with_hook: bool) -> tuple[int, int]:
    """(registration RPCs in flight when the SDK starts its final wait, resources registered)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = CollectingMocks()
    pulumi.runtime.set_mocks(mocks, project="gpupool", stack="wait", preview=True, monitor=RecordingMonitor(mocks))
    pulumi.runtime.set_all_config({"gpupool:spec": str(spec)})
    pulumi_settings.ROOT.set(None)  # run_in_stack makes its own root stack, as a real run does
    in_flight: list[int] = []
    real_wait = pulumi_stack.wait_for_rpcs

    async def recording_wait(*args, **kwargs):
        in_flight.append(len(pulumi_stack._get_rpc_manager().rpcs))
        return await real_wait(*args, **kwargs)

    monkeypatch.setattr(pulumi_stack, "wait_for_rpcs", recording_wait)
    if not with_hook:
        monkeypatch.setattr(program, "wait_for_registrations_linearly", lambda: None)
    try:
        loop.run_until_complete(pulumi_stack.run_in_stack(program.main))
    finally:
        loop.close()
        asyncio.set_event_loop(asyncio.new_event_loop())  # later tests' mocks expect a current loop
        pulumi_settings.ROOT.set(None)
    return in_flight[0], len(mocks.created)


@pytest.fixture
def spec(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from bench_validate import generate

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(generate(20, 4), sort_keys=False))
    return path


def test_every_registration_is_in_flight_when_the_sdk_starts_waiting(spec, monkeypatch):
    in_flight, registered = _in_flight_when_program_returns(spec, monkeypatch, with_hook=True)
    # Each resource's registration is one RPC (plus the components' register_outputs): all started.
    assert registered > 100
    assert in_flight >= registered


def test_without_the_hook_the_sdk_would_start_waiting_on_outputs(spec, monkeypatch):
    """The control: the premise of the hook still holds for this SDK version."""
    in_flight, registered = _in_flight_when_program_returns(spec, monkeypatch, with_hook=False)
    assert in_flight < registered / 10
