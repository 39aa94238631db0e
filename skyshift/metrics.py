"""Prometheus metrics of SkyShift's own processes (names ``skyshift_*``).

One definition per metric, shared by the process that updates it:

* the API server: requests and their latency, by route template (never the raw path, so a
  hostile client cannot create a series per URL);
* the control worker: jobs by phase (kept current from a watch of the jobs, so a scrape right
  after a job changes phase shows it: :mod:`skyshift.workers.job_phases`), the scheduler's queue
  depth, placement latency (a job's creation to its placement) and preemptions;
* the skylet manager: the time of each cluster's sync round.

The Temporal SDK's own metrics (``temporal_*``) come from its Runtime telemetry and are served
on the same endpoint by the workers (``skyshift.workers.metrics_http``).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

API_REQUESTS = Counter(
    "skyshift_api_requests", "API requests answered, by method, route and status code",
    ["method", "route", "code"],
)
API_LATENCY = Histogram(
    "skyshift_api_request_duration_seconds", "Time to answer an API request (watches excluded)",
    ["method", "route"], buckets=LATENCY_BUCKETS,
)
JOBS = Gauge(
    "skyshift_jobs", "Jobs in etcd by phase, updated by the control worker on every change",
    ["phase"],
)
QUOTA_USED = Gauge(
    "skyshift_quota_used", "What a namespace's admitted jobs hold against one of its Quotas",
    ["namespace", "quota", "resource"],
)
QUOTA_HARD = Gauge(
    "skyshift_quota_hard", "A Quota's hard limit, per resource", ["namespace", "quota", "resource"],
)
QUEUE_DEPTH = Gauge(
    "skyshift_scheduler_queue_depth", "Jobs waiting in the scheduler workflow's queue",
)
PLACEMENT_LATENCY = Histogram(
    "skyshift_placement_latency_seconds", "From a job's creation to its placement on clusters",
    buckets=LATENCY_BUCKETS,
)
PREEMPTIONS = Counter(
    "skyshift_preemptions",
    "Jobs evicted for a higher-priority one, by the evicted job's namespace", ["namespace"],
)
SYNC_ROUND = Histogram(
    "skyshift_sync_round_seconds", "Time of one sync round of a cluster (list, compare, report)",
    ["cluster"], buckets=LATENCY_BUCKETS,
)
JOB_PHASES = ("Pending", "Scheduled", "Running", "Succeeded", "Failed", "Deleting")


def set_job_phases(counts: dict[str, int]) -> None:
    """Every known phase gets a value (0 when absent), so a phase that empties reads 0; any
    other phase string is counted as ``Other`` (a bounded set of series whatever is stored)."""
    other = sum(n for phase, n in counts.items() if phase not in JOB_PHASES)
    for phase in JOB_PHASES:
        JOBS.labels(phase=phase).set(counts.get(phase, 0))
    JOBS.labels(phase="Other").set(other)
