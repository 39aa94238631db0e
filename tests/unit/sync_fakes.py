"""Fakes for unit tests of the skylet's sync round: a store holding one job object and a
Temporal client recording the signals it is asked to send."""

from __future__ import annotations

from typing import Any


class OneJobStore:
    """guaranteed_update on one job object."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job

    async def guaranteed_update(self, plural: str, name: str, namespace: str | None,
                                mutate: Any) -> dict[str, Any]:
        out = mutate(self.job)
        if out is not None:
            self.job = out
        return self.job


class SignalRecorder:
    """``get_workflow_handle(id).signal(name, payload)`` appends (id, name, payload)."""

    def __init__(self) -> None:
        self.signals: list[tuple[str, str, Any]] = []

    def get_workflow_handle(self, wf_id: str) -> Any:
        recorder = self

        class Handle:
            async def signal(self, name: str, payload: Any) -> None:
                recorder.signals.append((wf_id, name, payload))

        return Handle()
