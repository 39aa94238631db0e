"""The signal handlers every object lifecycle shares, and how its teardown ends.

Each stored object (Job, Service, Pipeline, Schedule, Link, Cluster) has one workflow, and the
API and the reconciler talk to all of them the same way:

* ``spec_changed`` (SIG_SPEC): the stored spec changed; the workflow re-reads it (``spec_dirty``).
* ``delete`` (SIG_DELETE): tear down, when the request names this object's uid (or no uid).
* ``ensure`` (SIG_ENSURE, not for clusters): the object as stored. Being deleted: tear down. A
  newer object reusing the name (another uid): tear this one down, then become the newer one's
  lifecycle (``successor``, continue-as-new). Otherwise ``_ensured`` says what it means to this
  kind (nothing, by default).

Handlers only set flags: the workflow's run loop acts on them, so moving them here issues the
same commands as before for every history (tests/workflows/test_replay.py).
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Protocol, TypeVar

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from skyshift.contract.jobs import DeleteRequest, SpecChanged
    from skyshift.contract.names import SIG_DELETE, SIG_ENSURE, SIG_SPEC
    from skyshift.workflows.common import STORE_RETRY, STORE_TIMEOUT


class ObjectInput(Protocol):
    """What every lifecycle's input has: the object's uid and whether it is being deleted."""

    uid: str
    deleting: bool


class ObjectState(Protocol):
    deleting: bool


class StoredRead(Protocol):
    """What reading an object back from etcd answers, whatever its kind."""

    found: bool
    deleting: bool


InputT = TypeVar("InputT", bound=ObjectInput)
ReadT = TypeVar("ReadT", bound=StoredRead)
StateT = TypeVar("StateT", bound=ObjectState)


class Deletable(Generic[InputT]):
    """``spec_changed`` and ``delete``; the subclass sets ``inp``, ``deleting``, ``spec_dirty``."""

    inp: InputT
    deleting: bool
    spec_dirty: bool

    @workflow.signal(name=SIG_SPEC)
    def spec_changed(self, _: SpecChanged) -> None:
        self.spec_dirty = True

    @workflow.signal(name=SIG_DELETE)
    def delete(self, d: DeleteRequest) -> None:
        if not d.uid or d.uid == self.inp.uid:
            self.deleting = True

    async def _continue_as_new(self, carry: InputT) -> None:
        """Continue as ``carry`` once every signal handler has finished."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(carry)


class Lifecycle(Deletable[InputT]):
    """Adds ``ensure`` and the end of a teardown. ``input_type`` is the class of ``inp`` (the
    signal's payload is decoded into it: one handler serves every kind)."""

    input_type: ClassVar[type[Any]]
    successor: InputT | None

    @workflow.signal(name=SIG_ENSURE)
    def ensure(self, raw: RawValue) -> None:
        newer: InputT = workflow.payload_converter().from_payload(raw.payload, self.input_type)
        if newer.uid != self.inp.uid:
            self.successor = newer
            self.deleting = True
        elif newer.deleting:
            self.deleting = True
        else:
            self._ensured(newer)

    def _ensured(self, newer: InputT) -> None:
        """The same object, not being deleted, sent again."""

    async def _read_stored(
        self,
        activity: str,
        arg: object,
        result_type: type[ReadT],
    ) -> ReadT | None:
        """After ``spec_changed``: read the object as stored (a local activity answering with
        ``found`` and ``deleting``); None, and tear down, when it is gone or being deleted."""
        self.spec_dirty = False
        got: ReadT = await workflow.execute_local_activity(
            activity,
            arg,
            result_type=result_type,
            start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
        )
        if not got.found or got.deleting:
            self.deleting = True
            return None
        return got

    async def _deleted(self) -> str:
        """The last step of a teardown: become the successor, if a newer object took the
        name, else end."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        if self.successor is not None:
            workflow.continue_as_new(self.successor)
        return "Deleted"


class StateLifecycle(Lifecycle[InputT], Generic[InputT, StateT]):
    """A lifecycle whose state (``s``, carried over continue-as-new) holds ``deleting``."""

    s: StateT

    @property  # type: ignore[override]
    def deleting(self) -> bool:
        return self.s.deleting

    @deleting.setter
    def deleting(self, value: bool) -> None:
        self.s.deleting = value
