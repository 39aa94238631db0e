"""How long one scheduling batch takes: ``python bench/scheduler.py [--jobs N ...]``.

The SchedulerWorkflow places a whole batch in one activity, so the batch time bounds how fast a
burst of submissions can be scheduled. The default batch (1,000 jobs x 4 replicas, 3 clusters x
100 nodes of 32 cpus) asks for slightly more than the fleet holds, so the figure includes the
explanations written for the jobs that stay pending. Prints figures; asserts nothing.
"""

import argparse
import random
import statistics
import time

from skyshift.models.quantity import Resources
from skyshift.scheduler import (
    ClusterInfo,
    Expression,
    Filter,
    FilterPolicyInfo,
    JobRequest,
    NodeInfo,
    Preference,
    schedule_batch,
)


def make_batch(
    jobs: int, replicas: int, clusters: int, nodes: int, seed: int
) -> tuple[list[JobRequest], list[ClusterInfo], list[FilterPolicyInfo]]:
    rng = random.Random(seed)
    fleet = [
        ClusterInfo(
            f"cluster-{c}",
            {"region": rng.choice(["us", "eu"]), "tier": rng.choice(["spot", "ondemand"])},
            True,
            [NodeInfo(f"cluster-{c}-node-{n}",
                      Resources(32, 128_000, rng.choice([0, 0, 4]), {}))
             for n in range(nodes)],
        )
        for c in range(clusters)
    ]
    work = [
        JobRequest(
            key=f"team-{i % 5}/job-{i}", uid=f"uid-{i}", namespace=f"team-{i % 5}",
            labels={"app": f"app-{i % 7}"}, priority=rng.randint(0, 3), created=float(i),
            replicas=replicas,
            per_replica=Resources(rng.choice([1, 2, 3, 4]), rng.choice([1024, 4096, 8192]),
                                  1 if rng.random() < 0.1 else 0),
            filters=[Filter(match_expressions=[Expression("region", "In", ["us", "eu"])])],
            preferences=[Preference(match_labels={"tier": "spot"}, weight=rng.randint(1, 100))],
        )
        for i in range(jobs)
    ]
    policies = [FilterPolicyInfo("keep-off-0", "team-0", {"app": "app-1"},
                                 exclude=["cluster-0"])]
    return work, fleet, policies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    jobs, clusters, policies = make_batch(args.jobs, args.replicas, args.clusters, args.nodes,
                                          args.seed)
    schedule_batch(jobs, clusters, policies)  # warm-up
    times: list[float] = []
    placed = 0
    for _ in range(args.rounds):
        start = time.perf_counter()
        decisions = schedule_batch(jobs, clusters, policies)
        times.append(time.perf_counter() - start)
        placed = sum(d.placed for d in decisions)
    times.sort()
    median = statistics.median(times)
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    print(f"batch: {args.jobs} jobs x {args.replicas} replicas over {args.clusters} clusters "
          f"x {args.nodes} nodes; {placed} placed, {args.jobs - placed} pending; "
          f"{args.rounds} rounds")
    print(f"per batch: median {median * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms")
    print(f"throughput: {args.jobs / median:,.0f} jobs/s at the median")


if __name__ == "__main__":
    main()
