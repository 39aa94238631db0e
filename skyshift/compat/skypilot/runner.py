"""The SkyPilot SDK calls, run inside SkyPilot's own virtualenv by ``client``.

SkyPilot pins versions of shared libraries (click, bcrypt, uvicorn, protobuf) that SkyShift's
environment cannot take, so it lives in a virtualenv of its own and is never imported by
SkyShift. The driver runs this file's source with that venv's python (``python -c``, as the
dedicated SkyPilot user) and keeps it running: it imports SkyPilot once, then serves requests
until its stdin closes (the driver closed it or died), each in a thread of its own, so a
``sky status`` runs beside a ``sky queue``.

Protocol, one JSON object a line. In (stdin): ``{"id": n, "op": ..., args}``, or
``{"id": n, "op": "abandon"}`` when the driver gave up on request ``n`` (its read-only SkyPilot
requests are cancelled on the API server; a launch, down, exec or cancel runs to its end, as a
killed one-shot process's did). Out (stdout, each line ``@@skyshift@@ <json>``):
``{"id": n, "line": ...}`` for what request ``n`` printed (SkyPilot's log stream, its logger:
``sys.stdout`` is routed by thread), ``{"id": n, "result": ...}`` or ``{"id": n, "error":
{"type", "mro", "message"}}`` last, and ``{"beat": k}`` every ``argv[1]`` seconds (k requests in
flight: the driver replaces a runner that stops beating). The answers go out on a duplicate of
the original stdout that no child inherits; file descriptors 1 and 2 point at /dev/null, so
nothing SkyPilot starts can write into the protocol or hold its pipe open. Standard library and
``sky`` only: nothing of SkyShift is importable there.
"""

import concurrent.futures
import io
import json
import os
import sys
import threading
import time
from typing import Any

MARK = "@@skyshift@@"
READS = frozenset({"status", "queue", "logs", "check"})  # cancelled when abandoned
_WRITE = threading.Lock()
_LOCAL = threading.local()  # .req: the _Request this thread serves
_PROTO: list[Any] = []  # the protocol's stream (binary), once main() set it up


class _Request:
    def __init__(self, rid: int, op: str) -> None:
        self.id, self.op = rid, op
        self.sky_ids: list[Any] = []  # the SkyPilot requests it made (to cancel)


_REQUESTS: dict[int, _Request] = {}
_REQ_LOCK = threading.Lock()


def _send(obj: dict[str, Any]) -> None:
    data = (MARK + " " + json.dumps(obj, default=str) + "\n").encode()
    with _WRITE:
        _PROTO[0].write(data)
        _PROTO[0].flush()


def _current() -> int | None:
    req = getattr(_LOCAL, "req", None)
    return req.id if req is not None else None


class _Lines(io.TextIOBase):
    """Text sent line by line as ``{"id", "line"}``: for request ``rid``, or (None) for the
    request the writing thread serves; a thread serving none writes with id null."""

    def __init__(self, rid: int | None = None) -> None:
        self._rid = rid
        self._parts: dict[int | None, str] = {}
        self._lock = threading.Lock()

    def write(self, s: str) -> int:  # type: ignore[override]
        rid = self._rid if self._rid is not None else _current()
        with self._lock:
            *lines, rest = (self._parts.pop(rid, "") + s).split("\n")
            if len(rest) > 65536:
                lines, rest = [*lines, rest], ""
            if rest:
                self._parts[rid] = rest
        for line in lines:
            _send({"id": rid, "line": line})
        return len(s)

    def end(self, rid: int | None) -> None:
        """Send what ``rid`` left without a newline."""
        with self._lock:
            rest = self._parts.pop(rid, "")
        if rest:
            _send({"id": rid, "line": rest})

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


def _sent(sky_id: Any) -> Any:
    """Note a SkyPilot request of the current request (cancelled if it is abandoned)."""
    req = getattr(_LOCAL, "req", None)
    if req is not None:
        req.sky_ids.append(sky_id)
    return sky_id


def _stream(sdk: Any, sky_id: Any) -> Any:
    """Wait for a SkyPilot request, its log lines going to the current request."""
    rid = _current()
    out = _Lines(rid)
    try:
        return sdk.stream_and_get(_sent(sky_id), output_stream=out)
    finally:
        out.end(rid)


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
    records = sdk.get(_sent(sdk.status(cluster_names=names, refresh=mode, all_users=True)))
    return [_record(r) for r in records]


def op_check(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    return sdk.get(_sent(sdk.check(infra_list=req.get("infra") or None, verbose=False)))


def op_launch(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    task = sky.Task(name="skyshift-provision", num_nodes=int(req.get("nodes") or 1))
    task.set_resources(_resources(sky, req))
    _stream(sdk, sdk.launch(task, cluster_name=req["cluster"], retry_until_up=False,
                            _need_confirmation=False))
    return _status(sky, sdk, [req["cluster"]], False)


def op_status(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    return _status(sky, sdk, list(req["clusters"]), bool(req.get("refresh")))


def op_down(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    from sky import exceptions

    try:
        _stream(sdk, sdk.down(req["cluster"]))
    except exceptions.ClusterDoesNotExist:
        return {"absent": True}
    return {"absent": False}


def op_exec(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    task = sky.Task(name=req["name"], run=req["run"], envs=dict(req.get("envs") or {}))
    if req.get("cpus"):
        task.set_resources(sky.Resources(cpus=str(req["cpus"])))
    job_id, _ = sdk.get(_sent(sdk.exec(task, cluster_name=req["cluster"])))
    return {"job_id": job_id}


def op_queue(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    """The job tables of several clusters: the requests go out together, answers per cluster."""
    ids = {c: _sent(sdk.queue(c, skip_finished=False, all_users=True))
           for c in req["clusters"]}
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
    sdk.get(_sent(sdk.cancel(req["cluster"], job_ids=[int(j) for j in req["job_ids"]])))
    return {}


def op_api_stop(sky: Any, sdk: Any, req: dict[str, Any]) -> Any:
    sdk.api_stop()
    return {}


def _error(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
            "message": str(exc)[-4000:]}


class _Server:
    """SkyPilot imported (or why not), and the threads serving the requests."""

    def __init__(self, routed: _Lines) -> None:
        self.routed = routed
        self.sky: Any = None
        self.sdk: Any = None
        self.failed: BaseException | None = None
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=64)

    def load(self) -> None:
        try:
            import sky
            from sky.client import sdk
        except BaseException as exc:  # said in the answer to every request
            self.failed = exc
        else:
            self.sky, self.sdk = sky, sdk

    def serve(self, req: dict[str, Any]) -> None:
        rid = int(req["id"])
        this = _Request(rid, str(req.get("op")))
        with _REQ_LOCK:
            _REQUESTS[rid] = this
        _LOCAL.req = this
        try:
            if self.failed is not None:
                raise self.failed
            fn = globals()["op_" + this.op]
            answer: dict[str, Any] = {"id": rid, "result": fn(self.sky, self.sdk, req)}
        except BaseException as exc:  # every failure becomes an answer
            answer = {"id": rid, "error": _error(exc)}
        finally:
            _LOCAL.req = None
            with _REQ_LOCK:
                _REQUESTS.pop(rid, None)
        self.routed.end(rid)
        _send(answer)

    def abandon(self, rid: int) -> None:
        """The driver gave up on ``rid``: cancel its read-only SkyPilot requests."""
        with _REQ_LOCK:
            req = _REQUESTS.get(rid)
            ids = list(req.sky_ids) if req is not None and req.op in READS else []
        if ids and self.sdk is not None:
            self.pool.submit(self.sdk.api_cancel, ids, silent=True)


def _beat(every: float) -> None:
    while True:
        time.sleep(every)
        with _REQ_LOCK:
            busy = len(_REQUESTS)
        _send({"beat": busy})


def main() -> None:
    _PROTO.append(os.fdopen(os.dup(1), "wb"))  # os.dup: not inherited by children
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    routed = _Lines()
    sys.stdout = sys.stderr = routed  # before SkyPilot's logger takes sys.stdout
    every = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    threading.Thread(target=_beat, args=(every,), daemon=True).start()
    server = _Server(routed)
    server.load()  # seconds of CPU, once; requests wait in the pipe meanwhile
    for raw in sys.stdin.buffer:
        try:
            req = json.loads(raw)
            rid = int(req["id"])
        except (ValueError, KeyError, TypeError):
            continue
        if req.get("op") == "abandon":
            server.abandon(rid)
        else:
            server.pool.submit(server.serve, req)
    os._exit(0)  # stdin closed: the driver is gone; requests in flight have no one to answer


if __name__ == "__main__":
    main()
