"""Pure placement: which clusters get a pending job's replicas, and why others do not.

No I/O, no Temporal, no pydantic: plain dataclasses in and out, so the SchedulerWorkflow's
activity can hand them over as payloads and unit tests can exercise every rule directly.
"""

from skyshift.scheduler.core import schedule_batch
from skyshift.scheduler.types import (
    ClusterInfo,
    Decision,
    Expression,
    Filter,
    FilterPolicyInfo,
    JobRequest,
    NodeInfo,
    Preference,
)

__all__ = [
    "ClusterInfo",
    "Decision",
    "Expression",
    "Filter",
    "FilterPolicyInfo",
    "JobRequest",
    "NodeInfo",
    "Preference",
    "schedule_batch",
]
