"""An Automation API stack whose `up` and `refresh` run pulumi once each, not four and two times.

`auto.Stack.up` (pulumi/automation/_stack.py, `up`: `_run_pulumi_cmd_sync(args)`, then `self.outputs()` and
`self.info()`) follows the update with `pulumi stack output --json`, `pulumi stack output --json
--show-secrets` and `pulumi stack history --page-size 1`, and `refresh` with the history: more pulumi
processes, each loading and decrypting the whole state (about a second each on a stack of a few hundred
resources on 2 cores). gpupool reads neither the outputs nor the history record, only the change counts,
which the engine's summary event carries too (the same event `auto.Stack.preview` reads its counts from). So
here they listen for that event and, while they run, `outputs()` answers an empty map and `info()` a summary
built from the event.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from pulumi import automation as auto
from pulumi.automation._stack import StackInitMode


class LeanStack(auto.Stack):
    _in_op = False
    _seen: list[Any] = []

    # auto.Stack's own constructors build an auto.Stack whatever the class (`return Stack(...)`).
    @classmethod
    def create_or_select(cls, stack_name: str, workspace: auto.Workspace) -> LeanStack:
        return cls(stack_name, workspace, StackInitMode.CREATE_OR_SELECT)

    @classmethod
    def select(cls, stack_name: str, workspace: auto.Workspace) -> LeanStack:
        return cls(stack_name, workspace, StackInitMode.SELECT)

    def up(self, **kwargs: Any) -> auto.UpResult:  # type: ignore[override]  # keyword arguments only, as gpupool calls it
        return self._lean(super().up, kwargs)

    def refresh(self, **kwargs: Any) -> auto.RefreshResult:  # type: ignore[override]
        return self._lean(super().refresh, kwargs)

    def _lean(self, run: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        theirs = kwargs.pop("on_event", None)
        seen: list[Any] = []

        def on_event(event: Any) -> None:
            if event.summary_event is not None:
                seen.append(event.summary_event)
            if theirs is not None:
                theirs(event)

        self._in_op, self._seen = True, seen
        try:
            return run(**kwargs, on_event=on_event)
        finally:
            self._in_op = False

    def outputs(self) -> auto.OutputMap:
        if self._in_op:
            return {}
        return super().outputs()

    def info(self, show_secrets: bool = True) -> auto.UpdateSummary | None:
        if not self._in_op or not self._seen:  # outside up/refresh, or no summary event: the history, as auto
            return super().info(show_secrets)
        now = datetime.datetime.now(datetime.UTC)
        return auto.UpdateSummary(
            kind="update",
            start_time=now,
            message="",
            environment={},
            config={},
            result="succeeded",
            end_time=now,
            resource_changes=self._seen[-1].resource_changes,
        )
