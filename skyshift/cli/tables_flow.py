"""Tables of pipelines and schedules (``get`` and ``describe``), on plain manifest dicts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from skyshift.cli.render import Table, format_age

Obj = Mapping[str, Any]

PIPELINE_HEADERS = ["NAME", "STATUS", "STEPS", "AGE"]
PIPELINE_WIDE = ["DURATION", "MESSAGE"]
SCHEDULE_HEADERS = ["NAME", "SCHEDULE", "STATUS", "LAST RUN", "NEXT RUN", "RUNS", "AGE"]
SCHEDULE_WIDE = ["CREATES", "OVERLAP", "TIMEZONE", "LAST"]


def _m(obj: Obj, key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def steps_summary(steps: Mapping[str, Any], total: int) -> str:
    """``2/5 done, 1 running, 1 failed``: where a pipeline stands at a glance."""
    counts: Counter[str] = Counter(
        str(s.get("phase") or "Pending") for s in steps.values() if isinstance(s, Mapping))
    out = [f"{counts['Succeeded']}/{total} done"]
    for phase in ("Running", "Failed", "Skipped", "Cancelled"):
        if counts[phase]:
            out.append(f"{counts[phase]} {phase.lower()}")
    return ", ".join(out)


def _parse(ts: Any) -> datetime | None:
    try:
        return datetime.strptime(str(ts), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def _duration(start: Any, end: Any, now: datetime | None) -> str:
    begin = _parse(start)
    if begin is None:
        return "-"
    finish = _parse(end) or now or datetime.now(UTC)
    return format_age(begin.strftime("%Y-%m-%dT%H:%M:%SZ"), finish)


def pipeline_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    meta, spec, status = _m(obj, "metadata"), _m(obj, "spec"), _m(obj, "status")
    total = len(spec.get("steps") or []) or len(_m(status, "steps"))
    row = [str(meta.get("name") or "-"), str(status.get("phase") or "Pending"),
           steps_summary(_m(status, "steps"), total),
           format_age(meta.get("creationTimestamp"), now)]
    if wide:
        row += [_duration(status.get("startTime"), status.get("completionTime"), now),
                " ".join(str(status.get("message") or "-").split())]
    return [row]


def _until(ts: Any, now: datetime | None) -> str:
    when = _parse(ts)
    if when is None:
        return "-"
    ref = now or datetime.now(UTC)
    if when <= ref:
        return "now"
    return "in " + format_age(ref.strftime("%Y-%m-%dT%H:%M:%SZ"), when)


def schedule_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    meta, spec, status = _m(obj, "metadata"), _m(obj, "spec"), _m(obj, "status")
    when = str(spec.get("cron") or "") or f"every {spec.get('interval') or '?'}"
    last = status.get("lastScheduleTime")
    nxt = (status.get("nextRunTimes") or [None])[0]
    row = [str(meta.get("name") or "-"), when, str(status.get("phase") or "Pending"),
           f"{format_age(last, now)} ago" if last else "-", _until(nxt, now),
           str(status.get("runs") or 0), format_age(meta.get("creationTimestamp"), now)]
    if wide:
        creates = "Pipeline" if spec.get("pipelineTemplate") is not None else "Job"
        row += [creates, str(spec.get("overlapPolicy") or "Skip"),
                str(spec.get("timezone") or "UTC"), str(status.get("lastRun") or "-")]
    return [row]


def _order(steps: list[Any]) -> list[Mapping[str, Any]]:
    """Steps after what they depend on (spec order among equals)."""
    left = [s for s in steps if isinstance(s, Mapping)]
    done: set[str] = set()
    out: list[Mapping[str, Any]] = []
    while left:
        ready = [s for s in left if all(d in done for d in s.get("dependsOn") or [])] or left
        for s in ready:
            done.add(str(s.get("name")))
            out.append(s)
        left = [s for s in left if str(s.get("name")) not in done]
    return out


def dag_table(obj: Obj) -> str:
    """The DAG of a pipeline with each step's state: what ``describe pipeline`` shows."""
    spec, status = _m(obj, "spec"), _m(obj, "status")
    states = _m(status, "steps")
    table = Table(["STEP", "STATUS", "DEPENDS ON", "ON FAILURE", "ATTEMPTS", "JOB", "MESSAGE"],
                  status_col=1)
    for step in _order(list(spec.get("steps") or [])):
        name = str(step.get("name"))
        st = states.get(name) if isinstance(states.get(name), Mapping) else {}
        assert isinstance(st, Mapping)
        retries = int(step.get("retries") or 0)
        table.rows.append([
            name, str(st.get("phase") or "Pending"),
            ", ".join(str(d) for d in step.get("dependsOn") or []) or "-",
            str(step.get("onFailure") or "Fail"),
            f"{st.get('attempts') or 0}/{retries + 1}", str(st.get("job") or "-"),
            " ".join(str(st.get("message") or "-").split()),
        ])
    return table.render() if table.rows else ""


def next_runs(obj: Obj) -> str:
    times = _m(obj, "status").get("nextRunTimes") or []
    return "\n".join(str(t) for t in times)
