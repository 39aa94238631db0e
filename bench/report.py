"""Turn bench/results/latest.json into plots (PNG) and docs/benchmarks.md.

    python bench/report.py [--results bench/results/latest.json] [--docs docs/benchmarks.md]

Everything in the document comes from the JSON the benchmarks wrote (bench/run runs them all and
then this); the only hand-written part is the header below. Plots: API latency by operation and
stored-object count, throughput against client concurrency (bench/api_sweep.py), the object
store's figures, and, once bench/lifecycle.py reports them, the submit -> Running latency
distribution. A benchmark that is missing is listed as such, never invented.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, NullFormatter

PLAIN = FuncFormatter(lambda v, _: f"{v:g}")


def plain_log_y(ax: Any) -> None:
    """A log y axis labelled 1, 10, 100 rather than 10^0 ... (and no minor labels)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(PLAIN)
    ax.yaxis.set_minor_formatter(NullFormatter())

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"

HEADER = """# Benchmarks

Figures from one run of `bench/run` on the machine below (the benchmarks print them and write
`bench/results/latest.json`; `bench/report.py` generates this page and the plots from that file,
so edit the generator, not this page). They are measurements, not guarantees: on a 2-core machine
the load generator, the API server, etcd and (for the lifecycle) the Temporal dev server share the
CPU, so absolute numbers are the whole loopback system's. Medians (p50) and p99 are over the
samples of one run. The original SkyShift took 3.15 s (p50) from submit to Running on a local
Slurm, mostly its 3 s status poll; the watch figures below are what replaces that poll.

Reproduce: `./dev bench` (that is `bench/run`, which runs every benchmark and then
`bench/report.py`; `bench/run --quick` is a smoke run of under a minute). Raw figures:
[bench/results/latest.json](../bench/results/latest.json).
"""

ORIGINAL_POLL_S = 3.0
ORIGINAL_SUBMIT_TO_RUNNING_S = 3.15


def load(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError) as exc:
        raise SystemExit(f"cannot read {path}: {exc}; run bench/run first") from exc


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "n/a" if value is None else str(value)


def table(head: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def ratio(a: Any, b: Any) -> str:
    try:
        return f"{float(a) / float(b):,.1f}x"
    except (TypeError, ValueError, ZeroDivisionError):
        return "n/a"


# -- plots --------------------------------------------------------------------------------------

API_OPS = [
    ("create", "create (concurrent)"),
    ("get_sequential", "get (sequential)"),
    ("get_concurrent", "get (concurrent)"),
    ("watch_event_latency", "watch: patch -> event"),
]


def _api_rows(s: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    rows = [(label, s[key]) for key, label in API_OPS if key in s]
    lst = s.get("list", {})
    rows += [(f"list {k}", v) for k, v in (("all", lst.get("full")), ("limit=500",
             lst.get("page_500")), ("labelSelector", lst.get("selector"))) if v]
    return rows


def plot_api_latency(api: dict[str, Any], out: Path) -> None:
    sizes = sorted(api["sizes"], key=int)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    labels = [label for label, _ in _api_rows(api["sizes"][sizes[0]])]
    width = 0.8 / max(1, len(sizes))
    for i, size in enumerate(sizes):
        rows = dict(_api_rows(api["sizes"][size]))
        xs = [j + i * width for j in range(len(labels))]
        p50 = [rows[lbl]["p50_ms"] for lbl in labels]
        p99 = [rows[lbl]["p99_ms"] for lbl in labels]
        ax.bar(xs, p99, width, alpha=0.35, color=f"C{i}")
        ax.bar(xs, p50, width, color=f"C{i}", label=f"{int(size):,} jobs stored (p50; pale: p99)")
    ax.set_xticks([j + width * (len(sizes) - 1) / 2 for j in range(len(labels))], labels,
                  rotation=25, ha="right")
    plain_log_y(ax)
    ax.set_ylabel("latency (ms, log)")
    ax.set_title("API latency by operation")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def plot_sweep(sweep: dict[str, Any], out: Path) -> None:
    levels = sweep["levels"]
    conc = [r["concurrency"] for r in levels]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (("get", "get"), ("create", "create"), ("get_put_cas", "get + CAS put")):
        left.plot(conc, [r[key]["rps"] for r in levels], marker="o", label=label)
        right.plot(conc, [r[key]["p99_ms"] for r in levels], marker="o", label=label)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(conc, [str(c) for c in conc])
        ax.set_xlabel("concurrent clients")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    left.set_ylabel("requests/s")
    left.set_title("API throughput vs concurrency")
    right.set_ylabel("p99 latency (ms)")
    plain_log_y(right)
    right.set_title("p99 latency vs concurrency")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def plot_store(store: dict[str, Any], out: Path) -> None:
    ops = [k for k in ("create", "get", "get_then_cas_update", "contended_guaranteed_update")
           if k in store]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(ops, [store[k]["ops_per_s"] for k in ops], color="C2")
    ax.set_ylabel("operations/s")
    ax.set_title(f"Object store at concurrency {store.get('concurrency')}")
    ax.tick_params(axis="x", labelrotation=15)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def lifecycle_samples(data: dict[str, Any]) -> list[float] | None:
    """Submit -> Running samples in seconds, wherever bench/lifecycle.py put them."""
    for key, value in data.items():
        if "running" not in key.lower():
            continue
        if isinstance(value, list) and value and all(isinstance(v, int | float) for v in value):
            return [float(v) for v in value]
        if isinstance(value, dict):
            for sk, sv in value.items():
                if isinstance(sv, list) and sv and all(isinstance(v, int | float) for v in sv):
                    scale = 0.001 if sk.endswith("_ms") else 1.0
                    return [float(v) * scale for v in sv]
    return None


def plot_lifecycle(samples: list[float], out: Path) -> None:
    fig, (hist, cdf) = plt.subplots(1, 2, figsize=(10, 4))
    hist.hist(samples, bins=min(40, max(5, len(samples) // 5)), color="C1")
    hist.axvline(ORIGINAL_SUBMIT_TO_RUNNING_S, color="k", ls="--", label="original SkyShift p50")
    hist.set_xlabel("submit -> Running (s)")
    hist.set_ylabel("jobs")
    hist.legend(fontsize=8)
    ordered = sorted(samples)
    cdf.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], color="C1")
    cdf.axvline(ORIGINAL_SUBMIT_TO_RUNNING_S, color="k", ls="--")
    cdf.set_xlabel("submit -> Running (s)")
    cdf.set_ylabel("fraction of jobs")
    cdf.grid(alpha=0.3)
    fig.suptitle("Job submit -> Running latency")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


# -- document sections --------------------------------------------------------------------------


def section_machine(results: dict[str, Any]) -> str:
    m = results.get("machine", {})
    rows = [[k, m.get(k)] for k in ("cpus", "memory_gb", "platform", "python", "etcd",
                                     "temporal_cli", "temporalio", "when")]
    last = results.get("runs", {}).get("last", {})
    runs = last.get("runs", [])
    text = "## Machine and versions\n\n" + table(["", "value"], rows)
    if runs:
        rows2 = [[r["name"], " ".join(r.get("args") or []) or "(defaults)", r["exit"],
                  f"{r['seconds']:.0f}"] for r in runs]
        text += ("\n\nLast `bench/run`" + (" `--quick`" if last.get("quick") else "") + ":\n\n"
                 + table(["benchmark", "arguments", "exit", "seconds"], rows2))
    return text


def section_api(api: dict[str, Any], store: dict[str, Any] | None) -> str:
    sizes = sorted(api["sizes"], key=int)
    parts = ["## API server (bench/api.py)\n",
             "Requests over loopback HTTP to one `python -m skyshift.api` process on its own "
             "etcd: auth on (every request carries the admin's bearer token), lifecycle hooks "
             "off (workflow costs are bench/lifecycle.py's). Creates and concurrent gets use "
             f"{api['sizes'][sizes[0]]['create'].get('concurrency', '?')} clients.\n\n"
             "![API latency](../bench/results/api_latency.png)\n"]
    for size in sizes:
        s = api["sizes"][size]
        rows = [[label, r.get("n"), r["p50_ms"], r["p99_ms"], r.get("rps")]
                for label, r in _api_rows(s)]
        parts.append(f"### {int(size):,} jobs stored\n\n"
                     + table(["operation", "samples", "p50 ms", "p99 ms", "req/s"], rows) + "\n")
    small, big = api["sizes"][sizes[0]], api["sizes"][sizes[-1]]
    ratios = []
    if len(sizes) > 1:
        ratios += [
            [f"list all: {int(sizes[-1]):,} vs {int(sizes[0]):,} jobs (p50)",
             ratio(big["list"]["full"]["p50_ms"], small["list"]["full"]["p50_ms"]),
             f"objects grew {ratio(sizes[-1], sizes[0])}"],
            [f"get: {int(sizes[-1]):,} vs {int(sizes[0]):,} jobs (p50)",
             ratio(big["get_sequential"]["p50_ms"], small["get_sequential"]["p50_ms"]),
             "a get should not depend on how many objects exist"],
        ]
    ratios.append(["original 3 s status poll / watch event latency (p50)",
                   ratio(ORIGINAL_POLL_S * 1000, big["watch_event_latency"]["p50_ms"]),
                   "how much sooner a change is seen"])
    if store:
        ratios.append(["store create ops/s / API create req/s",
                       ratio(store["create"]["ops_per_s"], big["create"]["rps"]),
                       "cost of HTTP + validation over the bare store"])
    parts.append("### Ratios\n\n" + table(["ratio", "value", "meaning"], ratios) + "\n")
    return "\n".join(parts)


def section_sweep(sweep: dict[str, Any]) -> str:
    rows = [[r["concurrency"], r["create"]["rps"], r["get"]["rps"], r["get"]["p50_ms"],
             r["get"]["p99_ms"], r["get_put_cas"]["rps"], r["get_put_cas"]["p99_ms"]]
            for r in sweep["levels"]]
    levels = sweep["levels"]
    first, best = levels[0], max(levels, key=lambda r: r["get"]["rps"])
    last = levels[-1]
    after_peak = ""
    if last is not best:
        after_peak = (
            f" At {last['concurrency']} clients it is {fmt(last['get']['rps'])} req/s with p99 "
            f"{fmt(last['get']['p99_ms'])} ms: past the peak more clients only queue, as the "
            "Python load generator, the API process and etcd share two cores."
        )
    return (
        "## Throughput against concurrency (bench/api_sweep.py)\n\n"
        f"{sweep.get('seconds_per_phase')} s per operation and level, same single API process. "
        f"Peak get throughput {fmt(best['get']['rps'])} req/s at {best['concurrency']} clients, "
        f"{ratio(best['get']['rps'], first['get']['rps'])} the single-client rate.{after_peak}"
        "\n\n![throughput vs concurrency](../bench/results/api_throughput.png)\n\n"
        + table(["clients", "create/s", "get/s", "get p50 ms", "get p99 ms", "get+CAS put/s",
                 "get+CAS p99 ms"], rows) + "\n"
    )


def section_store(store: dict[str, Any]) -> str:
    rows = [[k, store[k]["ops_per_s"], store[k]["p50_ms"], store[k]["p99_ms"]]
            for k in ("create", "get", "get_then_cas_update", "contended_guaranteed_update")
            if k in store]
    wd = store.get("watch_delivery", {})
    return (
        "## Object store (bench/store_ops.py)\n\n"
        f"One ObjectStore on its own etcd, {fmt(store.get('objects'))} objects, concurrency "
        f"{store.get('concurrency')}.\n\n![store](../bench/results/store_ops.png)\n\n"
        + table(["operation", "ops/s", "p50 ms", "p99 ms"], rows)
        + f"\n\nList of {fmt(store.get('listed_items'))} objects: all at once "
        f"{fmt(store.get('list_all_ms'))} ms, in pages of 500 "
        f"{fmt(store.get('list_paginated_500_ms'))} ms, by label selector "
        f"{fmt(store.get('list_selector_ms'))} ms. Watch delivery (write acknowledged -> "
        f"event): p50 {fmt(wd.get('p50_ms'))} ms, p99 {fmt(wd.get('p99_ms'))} ms.\n"
    )


def section_scheduler(s: dict[str, Any]) -> str:
    if "batch_p50_ms" not in s:
        return "## Scheduler (bench/scheduler.py)\n\n```\n" + str(s.get("stdout", "")) + "\n```\n"
    return (
        "## Scheduler (bench/scheduler.py)\n\n"
        f"One placement batch of {fmt(s.get('jobs'))} jobs x {s.get('replicas')} replicas over "
        f"{s.get('clusters')} clusters x {s.get('nodes')} nodes ({fmt(s.get('placed'))} placed, "
        f"{fmt(s.get('pending'))} left pending with a reason), {s.get('rounds')} rounds: "
        f"p50 {fmt(s['batch_p50_ms'])} ms, p99 {fmt(s.get('batch_p99_ms'))} ms per batch, "
        f"{fmt(s.get('jobs_per_s'))} jobs/s at the median. Pure code, no I/O: the "
        "SchedulerWorkflow runs one such batch per activity.\n"
    )


def lifecycle_targets(d: dict[str, Any]) -> str:
    """The lifecycle issue's targets beside this run's figures."""
    lat, burst = d.get("submit_to_running") or {}, d.get("burst") or {}
    ceil, idle, small = (d.get("minimal_workflow_ceiling") or {}, d.get("idle") or {},
                         d.get("idle_small") or {})
    ratio, fo = d.get("burst_over_ceiling"), d.get("failover_s")

    def met(ok: bool | None) -> str:
        return "n/a" if ok is None else ("met" if ok else "NOT met")

    p50 = lat.get("p50_ms")
    ev_small, ev_big = small.get("history_events_per_s"), idle.get("history_events_per_s")
    rows = [
        ["submit -> Running p50 (200 jobs one at a time)", "<= 500 ms",
         f"{fmt(p50)} ms (p99 {fmt(lat.get('p99_ms'))} ms)",
         met(None if p50 is None else p50 <= 500)],
        ["burst / minimal-workflow ceiling", ">= 0.8",
         f"{fmt(ratio)} ({fmt(burst.get('jobs_per_s'))} jobs/s over "
         f"{fmt(ceil.get('workflows_per_s'))} workflows/s)",
         met(None if ratio is None else ratio >= 0.8)],
        ["idle Temporal history events/s", "not growing with running jobs",
         f"{fmt(ev_small)} with {fmt(small.get('running_jobs'))} jobs, {fmt(ev_big)} with "
         f"{fmt(idle.get('running_jobs'))}",
         met(None if ev_small is None or ev_big is None else ev_big <= max(ev_small, 0.05))],
        ["failover after a cluster is lost", "<= 15 s", f"{fmt(fo)} s",
         met(None if fo is None else fo <= 15)],
    ]
    cpu_job, cpu_wf = burst.get("cpu_ms_per_job") or {}, ceil.get("cpu_ms_per_workflow") or {}
    text = table(["target", "wanted", "this run", ""], rows) + "\n\n"
    if cpu_job.get("total") and cpu_wf.get("total"):
        text += (f"CPU per job (all processes of the stack): {fmt(cpu_job['total'])} ms, per "
                 f"minimal workflow {fmt(cpu_wf['total'])} ms (a job costs "
                 f"{fmt(cpu_job['total'] / cpu_wf['total'])}x a minimal workflow; issue #16 "
                 "wants <= 1.0x): the machine-independent view of "
                 "the same comparison; wall-clock rates vary between runs on a shared machine.\n\n")
    return text


PROVISION_LEAD = (
    "A provisioned cluster (1 node, 2 CPUs, 2 GB) on the SkyPilot test bed (SkyPilot 0.14 on "
    "the simulated Slurm cluster): SkyShift from POST of the Cluster to Ready against `sky "
    "launch` of the same shape straight (same driver, same user); jobs (`true`, 1 CPU) one at a "
    "time from POST to Succeeded against `sky exec` until `sky queue` says SUCCEEDED; teardown. "
    "A throwaway launch and down first, counted on neither side (the bed's first launch is "
    "slower). One run; `load_avg_1m` is the machine's load when it ended.\n\n"
)

PERSISTENCE_LEAD = (
    "The Temporal floor (minimal workflows of three no-op activities, 16 starts in flight) on "
    "dev servers that differ only in persistence: `file` is what `skyshift up` runs (SQLite, WAL, "
    "`synchronous=normal`), `file_sync_off` the same without syncs at checkpoints (a power loss "
    "can corrupt it), `memory` no file. Medians over the rounds, variants interleaved; "
    "`over_file` is each median over `file`'s. It says how much of the floor the Slurm and "
    "Kubernetes benchmarks print is the dev server's single SQLite writer rather than work a "
    "production Temporal cluster would also do.\n\n"
)

RAY_LEAD = (
    "Submit -> Running of one job at a time on one Ray head (`ray start --head`, 2 CPUs), "
    "through SkyShift (POST to `status.phase == Running`) against `JobSubmissionClient` "
    "straight on the same head (`submit_job` to RUNNING), same entrypoint and 0.5 CPU; "
    "`ratio_p50` is SkyShift's median over the straight one. One run; `load_1m` is the "
    "machine's load average when it ended.\n\n"
)


def k8s_target(d: dict[str, Any]) -> str:
    """Issue #16's Kubernetes target beside this run's figures (SkyShift against the same pods
    created straight through the kube API on the same clusters)."""
    h = d.get("headline") or {}
    ratio = h.get("over_direct")
    if h.get("direct_all_running_after_s") is None:
        return ""
    verdict = "n/a" if ratio is None else ("met" if ratio <= 1.25 else "NOT met")
    row = [f"time to all Running, {fmt(h.get('jobs'))} jobs x {fmt(h.get('replicas_per_job'))}"
           " replicas: SkyShift / direct", "<= 1.25x",
           f"{fmt(ratio)}x ({fmt(h.get('all_running_after_s'))} s / "
           f"{fmt(h.get('direct_all_running_after_s'))} s)", verdict]
    rows = [row]
    if h.get("over_direct_99pct") is not None:
        r99 = h["over_direct_99pct"]
        rows.append(["time to 99% Running: SkyShift / direct", "<= 1.25x",
                     f"{fmt(r99)}x ({fmt(h.get('running_99pct_after_s'))} s / "
                     f"{fmt(h.get('direct_running_99pct_after_s'))} s)",
                     "met" if r99 <= 1.25 else "NOT met"])
    if h.get("floor_over_direct") is not None:
        rows.append(["the Temporal floor: as many minimal workflows / direct", "(context)",
                     f"{fmt(h['floor_over_direct'])}x ({fmt(h.get('temporal_floor_s'))} s / "
                     f"{fmt(h.get('direct_all_running_after_s'))} s)", ""])
    if h.get("floor_with_pods_over_direct") is not None:
        rows.append(["the floor with the pods (the same pods and as many minimal workflows at "
                     "once) / direct: the best one workflow per job can reach here", "(context)",
                     f"{fmt(h['floor_with_pods_over_direct'])}x", ""])
    return table(["target", "wanted", "this run", ""], rows) + "\n\n"


def slurm_target(d: dict[str, Any]) -> str:
    """Issue #16's Slurm target beside this run's figures, with the Temporal floor."""
    drain = d.get("drain") or {}
    ratio = drain.get("ratio_skyshift_over_sbatch")
    if ratio is None:
        return ""
    rows = [[f"drain of {fmt(drain.get('jobs'))} x `{d.get('command', '')}`: SkyShift / sbatch",
             "<= 1.1x", f"{fmt(ratio)}x ({fmt(drain.get('skyshift_s'))} s / "
             f"{fmt(drain.get('sbatch_s'))} s)", "met" if ratio <= 1.1 else "NOT met"]]
    if drain.get("floor_over_sbatch") is not None:
        rows.append(["the Temporal floor: as many minimal workflows / sbatch", "(context)",
                     f"{fmt(drain['floor_over_sbatch'])}x ({fmt(drain.get('temporal_floor_s'))}"
                     f" s / {fmt(drain.get('sbatch_s'))} s)", ""])
    job_ms = (drain.get("cpu_ms_per_job") or {}).get("total")
    wf_ms = (drain.get("floor_cpu_ms_per_workflow") or {}).get("total")
    if job_ms and wf_ms:
        cpu = job_ms / wf_ms
        rows.append(["`slurm_cpu_per_job_over_minimal`: CPU per job in the drain / per minimal "
                     "workflow", "<= 1.0x", f"{fmt(cpu)}x ({fmt(job_ms)} ms / {fmt(wf_ms)} ms)",
                     "met" if cpu <= 1.0 else "NOT met"])
    over = d.get("slurm_drain_over_floor")
    if over:
        rows.append(["`slurm_drain_over_floor`: the drain / the Temporal floor", "<= 1.3x",
                     f"{fmt(over)}x ({fmt(drain.get('skyshift_s'))} s / "
                     f"{fmt(drain.get('temporal_floor_s'))} s)", "met" if over <= 1.3 else
                     "NOT met"])
    return table(["target", "wanted", "this run", ""], rows) + "\n\n"


def section_generic(name: str, data: dict[str, Any], images: list[str], lead: str = "") -> str:
    """Benchmarks this generator has no special layout for: their flat figures as a table."""
    rows: list[list[Any]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            rows.append([prefix, value])

    walk("", {k: v for k, v in data.items() if k != "stdout"})
    if isinstance(data.get("note"), str) and not lead:  # what the figures mean, from the run
        lead = data["note"].strip() + "\n\n"
    text = f"## {name} (bench/{name}.py)\n\n" + lead
    text += "".join(f"![{name}](../bench/results/{img})\n\n" for img in images)
    if rows:
        text += table(["figure", "value"], rows) + "\n"
    elif data.get("stdout"):
        text += "```\n" + data["stdout"].strip() + "\n```\n"
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS / "latest.json")
    ap.add_argument("--docs", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = ap.parse_args()
    results = load(args.results)
    benches: dict[str, Any] = results.get("benchmarks", {})
    out_dir = args.results.parent
    sections = [HEADER, section_machine(results)]
    made: list[str] = []

    def plot(name: str, fn: Callable[..., None], data: Any) -> None:
        try:
            fn(data, out_dir / name)
            made.append(name)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            print(f"plot {name} skipped: {exc!r}", file=sys.stderr)

    lifecycle = benches.get("lifecycle")
    if lifecycle:
        samples = lifecycle_samples(lifecycle)
        if samples:
            plot("lifecycle_submit_running.png", plot_lifecycle, samples)
        sections.append(section_generic(
            "lifecycle", lifecycle,
            ["lifecycle_submit_running.png"] if "lifecycle_submit_running.png" in made else [],
            lifecycle_targets(lifecycle)))
    if "api" in benches:
        plot("api_latency.png", plot_api_latency, benches["api"])
        sections.append(section_api(benches["api"], benches.get("store_ops")))
    if "api_sweep" in benches:
        plot("api_throughput.png", plot_sweep, benches["api_sweep"])
        sections.append(section_sweep(benches["api_sweep"]))
    if "store_ops" in benches:
        plot("store_ops.png", plot_store, benches["store_ops"])
        sections.append(section_store(benches["store_ops"]))
    if "scheduler" in benches:
        sections.append(section_scheduler(benches["scheduler"]))
    if "slurm" in benches:
        sections.append(section_generic("slurm", benches["slurm"], [],
                                        slurm_target(benches["slurm"])))
    if "k8s_scale" in benches:
        sections.append(section_generic("k8s_scale", benches["k8s_scale"], [],
                                        k8s_target(benches["k8s_scale"])))
    if "ray_jobs" in benches:
        sections.append(section_generic("ray_jobs", benches["ray_jobs"], [], RAY_LEAD))
    if "provision" in benches:
        sections.append(section_generic("provision", benches["provision"], [], PROVISION_LEAD))
    if "temporal_persistence" in benches:
        sections.append(section_generic("temporal_persistence", benches["temporal_persistence"],
                                        [], PERSISTENCE_LEAD))
    known = {"api", "api_sweep", "store_ops", "scheduler", "lifecycle", "slurm", "k8s_scale",
             "ray_jobs", "provision", "temporal_persistence"}
    for name in sorted(set(benches) - known):
        sections.append(section_generic(name, benches[name], []))
    absent = [n for n in ("lifecycle", "slurm", "k8s_scale") if n not in benches]
    if absent:
        sections.append("## Not measured yet\n\n" + ", ".join(f"bench/{n}.py" for n in absent)
                        + ": these benchmarks need the lifecycle plane and the simulated "
                        "clusters; their sections appear here once they report figures.\n")
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    args.docs.write_text("\n".join(s.rstrip() + "\n" for s in sections))
    print(f"wrote {args.docs} and {', '.join(made) or 'no plots'} in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
