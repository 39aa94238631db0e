"""The SkyPilot SDK calls, run inside SkyPilot's own virtualenv by ``client``.

SkyPilot pins versions of shared libraries (click, bcrypt, uvicorn, protobuf) that SkyShift's
environment cannot take, so it lives in a virtualenv of its own and is never imported by
SkyShift. The driver runs this file's source with that venv's python (``python -c``, as the
dedicated SkyPilot user): it reads one JSON request on stdin, makes the SDK calls, passes
SkyPilot's log stream through to stdout line by line, and prints the answer last, as one line
``@@skyshift-result@@ <json>``: ``{"result": ...}`` or ``{"error": {"type", "mro",
"message"}}``. Standard library and ``sky`` only: nothing of SkyShift is importable there.
"""

import io
import json
import sys
from typing import Any

MARK = "@@skyshift-result@@"


class _Passthrough(io.TextIOBase):
    """Where SkyPilot streams a request's logs: straight to our stdout."""

    def write(self, s: str) -> int:  # type: ignore[override]
        sys.stdout.write(s)
        sys.stdout.flush()
        return len(s)


def _answer(obj: Any) -> None:
    sys.stdout.write("\n" + MARK + " " + json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def _resources(sky: Any, req: dict[str, Any]) -> Any:
    kw: dict[str, Any] = {}
    if req.get("infra"):
        kw["infra"] = req["infra"]
    if req.get("cpus"):
        kw["cpus"] = str(req["cpus"])
    if req.get("memory"):
        kw["memory"] = str(req["memory"])
    if req.get("accelerators"):
        kw["accelerators"] = dict(req["accelerators"])
    return sky.Resources(**kw)


def _record(rec: Any) -> dict[str, Any]:
    handle = rec.get("handle")
    res = rec.get("launched_resources") or getattr(handle, "launched_resources", None)
    status = rec.get("status")
    return {
        "name": rec.get("name"),
        "status": getattr(status, "value", str(status)),
        "nodes": rec.get("launched_nodes") or getattr(handle, "launched_nodes", 0) or 0,
        "head_ip": getattr(handle, "head_ip", None) or "",
        "infra": str(getattr(res, "infra", "") or "") if res is not None else "",
        "cpus": str(getattr(res, "cpus", "") or "") if res is not None else "",
        "memory": str(getattr(res, "memory", "") or "") if res is not None else "",
        "accelerators": dict(getattr(res, "accelerators", None) or {}) if res is not None else {},
        "instance_type": str(getattr(res, "instance_type", "") or "") if res is not None else "",
    }


def _status(sky: Any, sdk: Any, names: list[str], refresh: bool) -> list[dict[str, Any]]:
    from sky.utils import common

    mode = common.StatusRefreshMode.FORCE if refresh else common.StatusRefreshMode.NONE
    records = sdk.get(sdk.status(cluster_names=names, refresh=mode, all_users=True))
    return [_record(r) for r in records]


def op_check(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    return sdk.get(sdk.check(infra_list=req.get("infra") or None, verbose=False))


def op_launch(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    task = sky.Task(name="skyshift-provision", num_nodes=int(req.get("nodes") or 1))
    task.set_resources(_resources(sky, req))
    rid = sdk.launch(task, cluster_name=req["cluster"], retry_until_up=False,
                     _need_confirmation=False)
    sdk.stream_and_get(rid, output_stream=_Passthrough())
    return _status(sky, sdk, [req["cluster"]], False)


def op_status(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    return _status(sky, sdk, list(req["clusters"]), bool(req.get("refresh")))


def op_down(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    from sky import exceptions

    try:
        sdk.stream_and_get(sdk.down(req["cluster"]), output_stream=_Passthrough())
    except exceptions.ClusterDoesNotExist:
        return {"absent": True}
    return {"absent": False}


def op_exec(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    task = sky.Task(name=req["name"], run=req["run"], envs=dict(req.get("envs") or {}))
    if req.get("cpus"):
        task.set_resources(sky.Resources(cpus=str(req["cpus"])))
    job_id, _ = sdk.get(sdk.exec(task, cluster_name=req["cluster"]))
    return {"job_id": job_id}


def op_queue(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    """The job tables of several clusters: the requests go out together, answers per cluster."""
    ids = {c: sdk.queue(c, skip_finished=False, all_users=True) for c in req["clusters"]}
    out: dict[str, Any] = {}
    for cluster, rid in ids.items():
        try:
            rows = sdk.get(rid)
        except Exception as exc:  # one cluster's failure must not hide the others' tables
            out[cluster] = {"error": _error(exc)}
            continue
        jobs = []
        for row in rows:
            d = row.model_dump() if hasattr(row, "model_dump") else dict(row)
            d["status"] = getattr(d.get("status"), "value", str(d.get("status")))
            jobs.append({k: d.get(k) for k in ("job_id", "job_name", "submitted_at", "start_at",
                                               "end_at", "resources", "status", "exit_codes")})
        out[cluster] = {"jobs": jobs}
    return out


def op_logs(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    buf = io.StringIO()
    code = sdk.tail_logs(req["cluster"], int(req["job_id"]), follow=False,
                         tail=int(req.get("tail") or 0), output_stream=buf)
    return {"text": buf.getvalue(), "code": code}


def op_cancel(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    # only these ids: all_users=True would cancel every job on the cluster
    sdk.get(sdk.cancel(req["cluster"], job_ids=[int(j) for j in req["job_ids"]]))
    return {}


def op_api_stop(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    sdk.api_stop()
    return {}


def _error(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
            "message": str(exc)[-4000:]}


def main() -> None:
    # SkyPilot first (seconds of CPU), the request after: a runner started ahead of its
    # request (the driver's ``warm``) is ready when the request comes
    try:
        import sky
        from sky.client import sdk
    except BaseException as exc:  # said in the answer to the request
        sky = sdk = None
        failed: BaseException | None = exc
    else:
        failed = None
    raw = sys.stdin.read()
    if not raw.strip():
        return  # ended unused (the driver closed or went away)
    try:
        if failed is not None:
            raise failed
        req = json.loads(raw)
        fn = globals()["op_" + req["op"]]
        result = fn(sky, sdk, req)
    except BaseException as exc:  # every failure becomes an answer
        _answer({"error": _error(exc)})
        return
    _answer({"result": result})


if __name__ == "__main__":
    main()
