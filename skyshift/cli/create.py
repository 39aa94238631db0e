"""``skyctl create KIND NAME ...``: objects from flags, with the original CLI's flags and aliases.

Manifests are built by :mod:`skyshift.cli.manifests` (validated before sending); this module is
only the flag surface. ``--dry-run`` prints the manifest instead of sending it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from skyshift.cli import manifests
from skyshift.cli.cluster_wait import finish, wait_ready
from skyshift.cli.groups import AliasedGroup
from skyshift.cli.kinds import NAME
from skyshift.cli.output import note, object_ref, to_yaml
from skyshift.cli.pairs import unique_pairs
from skyshift.cli.render import printable
from skyshift.cli.state import CliState, pass_state
from skyshift.client import ApiError
from skyshift.models import managers

PAIR = (str, str)


def manager_help() -> str:
    """``--manager``'s help: the managers declared now (a plugin's too)."""
    known = managers.all_names()
    attach = managers.listing(m for m in known if not m.provisions)
    runner = managers.provisioner()
    return f"Cluster manager: {attach}" + (f" (a provisioned cluster's is {runner})."
                                            if runner else ".")


class ManagerOption(click.Option):
    """``--manager``, whose help lists the managers known when it is shown."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = manager_help()
        return super().get_help_record(ctx)


@click.group(cls=AliasedGroup)
def create() -> None:
    """Create an object from flags (see `skyctl apply -f` for manifests).

    \b
    Example:
      skyctl create job hello --run "echo hello" --cpus 0.5 --restart_policy Never
    """


assert isinstance(create, AliasedGroup)


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--dry-run", is_flag=True, help="Print the manifest instead of creating it."
    )(fn)


def namespace_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--namespace", "-n", default=None, metavar="NS",
        help="Namespace (default: the context's, usually 'default').",
    )(fn)


def submit(state: CliState, manifest: dict[str, Any], dry_run: bool) -> None:
    if dry_run:
        click.echo(to_yaml(manifest), nl=False)
        return
    created = state.client().create(manifest)
    click.echo(f"{object_ref(manifest['kind'], created)} created")


def warn_missing_clusters(state: CliState, names: tuple[str, ...]) -> None:
    """``--cluster`` naming a cluster that does not exist: the job is created (the cluster may
    come), but the user is told it waits until then."""
    for cluster in names:
        try:
            state.client().get("Cluster", cluster)
        except ApiError as exc:
            if not exc.not_found:
                raise
            note(f"warning: cluster {printable(cluster)!r} does not exist (yet): the job stays "
                 "Pending until it does (or another --cluster it names is ready)")


@create.aliased("job", "jobs")
@click.argument("name", type=NAME)
@namespace_option
@click.option("--labels", "-l", type=PAIR, multiple=True, metavar="KEY VALUE",
              callback=unique_pairs, help="A label (repeatable).")
@click.option("--image", default=None, help="Container image (default ubuntu:22.04).")
@click.option("--envs", "-e", type=PAIR, multiple=True, metavar="KEY VALUE",
              callback=unique_pairs, help="An environment variable (repeatable).")
@click.option("--cpus", default="1", show_default=True,
              help="CPUs per replica (cores, or millicores like 500m).")
@click.option("--gpus", type=click.IntRange(min=0), default=0, show_default=True,
              help="GPUs of any type per replica.")
@click.option("--accelerators", "-a", default=None, metavar="TYPE:COUNT",
              help="Accelerators per replica, e.g. T4:1 or A100:2.")
@click.option("--memory", default="0", show_default=True,
              help="Memory per replica in MB (or with a unit: 4Gi, 512Mi).")
@click.option("--run", default="", help="Command to run in the container.")
@click.option("--replicas", type=click.IntRange(min=0), default=1, show_default=True,
              help="Number of replicas.")
@click.option("--restart_policy", "restart", default="OnFailure", show_default=True,
              help="OnFailure (restart failed replicas up to --max_restarts), Always "
                   "(long-running: restart on any exit) or Never.")
@click.option("--max_restarts", type=click.IntRange(min=0), default=None,
              help="Restarts allowed before the job fails (default 3).")
@click.option("--priority", type=int, default=None,
              help="Higher is scheduled first, and may evict lower-priority jobs to fit.")
@click.option("--preemption-policy", "preemption_policy", default=None,
              type=click.Choice(["PreemptLowerPriority", "Never"], case_sensitive=False),
              help="PreemptLowerPriority (default): evict lower-priority jobs when this one "
                   "does not fit; Never: only wait.")
@click.option("--ports", type=str, multiple=True, metavar="PORT",
              help="A container port (repeatable, or comma separated).")
@click.option("--volumes", "-v", type=PAIR, multiple=True, metavar="HOST_PATH MOUNT_PATH",
              help="Not supported yet: refused (no cluster manager mounts volumes).")
@click.option("--cluster", "clusters", multiple=True, metavar="CLUSTER",
              help="Run only on this cluster (repeatable: any of them). A placement filter on "
                   "the skyshift.io/cluster label every cluster has.")
@click.option("--placement", "placement", type=PAIR, multiple=True, metavar="KEY VALUE",
              callback=unique_pairs,
              help="Run only on clusters with this label (repeatable: all must match).")
@common
@pass_state
def create_job(state: CliState, /, name: str, namespace: str | None, dry_run: bool,
               **flags: Any) -> None:
    """Submit a job: replicas of a container that SkyShift places on clusters.

    \b
    Examples:
      skyctl create job basic-job --cpus 2 --memory 1024 --run "python script.py"
      skyctl create job gpu-job --gpus 1 -a V100:1 --replicas 4 --run "python train.py"
      skyctl create job batch --run "./process.sh" --restart_policy Never -e MODE fast
      skyctl create job pinned --run "hostname" --cluster kind-1
      skyctl create job gpu --run "nvidia-smi" --placement gpu a100
    """
    manifest = manifests.job_manifest(name, namespace=state.namespace(namespace), **flags)
    if flags.get("clusters") and not dry_run:
        warn_missing_clusters(state, flags["clusters"])
    submit(state, manifest, dry_run)


@create.aliased("cluster", "clusters", "cl", context_settings={"help_option_names": ["--help"]})
@click.argument("name", type=NAME)
@click.option("--manager", default="k8", show_default=True, cls=ManagerOption)
@click.option("--labels", "-l", type=PAIR, multiple=True, metavar="KEY VALUE",
              callback=unique_pairs,
              help="A label (repeatable); jobs' placement filters match these.")
@click.option("--cpus", default=None, help="vCPUs per node (provisioning; local: in all).")
@click.option("--memory", default=None, help="Memory per node, GB unless a unit is given.")
@click.option("--disk_size", default=None, help="OS disk per node, GB unless a unit is given.")
@click.option("--accelerators", default=None, metavar="TYPE:COUNT",
              help="Accelerators per node, e.g. V100:2.")
@click.option("--ports", type=str, multiple=True, metavar="PORT",
              help="Port to open (repeatable, or comma separated).")
@click.option("--num_nodes", "--min-nodes", "num_nodes", type=click.IntRange(0, 64), default=1,
              show_default=True,
              help="Nodes to provision first (the minimum); 0: scale from zero, launching "
                   "only when a job waits (needs --max-nodes).")
@click.option("--provision", is_flag=True,
              help="Provision the cluster through SkyPilot instead of attaching one.")
@click.option("--infra", default=None, metavar="INFRA",
              help="Where to provision, as SkyPilot names it: slurm/<cluster>, "
                   "kubernetes/<context>, aws/us-east-1, ...")
@click.option("--cloud", default=None,
              help="Cloud to provision on (the original's flag): --infra <cloud>/<region>.")
@click.option("--region", default=None, help="Region of --cloud.")
@click.option("--max-nodes", "max_nodes", type=click.IntRange(1, 64), default=None,
              help="Scale up to this many nodes when jobs wait (default: --num_nodes).")
@click.option("--idle-minutes", "idle_minutes", type=click.IntRange(0, 10080), default=None,
              help="Tear down after this long without SkyShift replicas (0: never).")
@click.option("--candidate", "candidates", multiple=True, metavar="INFRA",
              help="Infra to fail over to when --infra has no capacity (repeatable, in order).")
@click.option("--wait", is_flag=True,
              help="Follow the cluster's progress until it is Ready (or Failed).")
@click.option("--timeout", type=click.FloatRange(min=1), default=1800, show_default=True,
              metavar="SECONDS", help="With --wait: give up after this long.")
@click.option("--config", "-c", "-C", "config_path", default=None, metavar="PATH",
              help="kubeconfig or Slurm config file of the cluster.")
@click.option("--context", "kube_context", default=None,
              help="kubeconfig context to use (default: the context named like the cluster, "
                   "or the file's only one; with several and none named so, attaching fails).")
@click.option("--host", "-h", "--hostname", "-H", default=None,
              help="Login host (Slurm over SSH).")
@click.option("--username", "-u", default=None, help="SSH user name.")
@click.option("--ssh_key_path", "-k", default=None, metavar="PATH", help="SSH private key.")
@click.option("--address", default=None, metavar="URL",
              help="Ray dashboard URL (Jobs API) of a Ray cluster, e.g. http://127.0.0.1:8265; "
                   "only with --manager ray.")
@common
@pass_state
def create_cluster(state: CliState, /, name: str, dry_run: bool, wait: bool, timeout: float,
                   **flags: Any) -> None:
    """Attach an existing cluster, or provision one through SkyPilot (--provision), so
    SkyShift can place jobs on it.

    A provisioned cluster is launched on --infra (failing over to each --candidate when it has
    no capacity), grows up to --max-nodes when jobs wait, is torn down after --idle-minutes
    without replicas, and is torn down with `skyctl delete cluster`. With --min-nodes 0 it
    starts with no nodes (Ready at once), launches when a job waits for it, and goes back to
    zero nodes after --idle-minutes.

    \b
    Examples:
      skyctl create cluster kind-1 --manager k8 --config ~/.kube/config -l gpu none
      skyctl create cluster hpc --manager slurm --host login.hpc --username me -k ~/.ssh/id
      skyctl create cluster r1 --manager ray --address http://127.0.0.1:8265
      skyctl create cluster c1 --provision --infra slurm/sim-1 --cpus 2 --memory 4 \\
          --num_nodes 2 --max-nodes 4 --idle-minutes 10 --candidate kubernetes/kind --wait
      skyctl create cluster c2 --provision --cloud aws --region us-east-1 --cpus 4
      skyctl create cluster burst --provision --infra slurm/sim-1 --cpus 2 --min-nodes 0 \\
          --max-nodes 3 --idle-minutes 15
    """
    manifest = manifests.cluster_manifest(name, **flags)
    submit(state, manifest, dry_run)
    if wait and not dry_run:
        finish(wait_ready(state.client(), name, timeout))


@create.aliased("service", "services", "svc")
@click.argument("name", type=NAME)
@namespace_option
@click.option("--type", "--service_type", "-t", "service_type", default="ClusterIP",
              show_default=True,
              type=click.Choice(["ClusterIP", "NodePort", "LoadBalancer"], case_sensitive=False),
              help="Service type.")
@click.option("--selector", "-s", type=PAIR, multiple=True, metavar="KEY VALUE",
              callback=unique_pairs, help="Select replicas by label (repeatable).")
@click.option("--ports", "-p", type=(click.IntRange(1, 65535), click.IntRange(1, 65535)),
              multiple=True, metavar="PORT TARGET", help="Port and target port (repeatable).")
@click.option("--cluster", "-c", default="auto", show_default=True,
              help="Primary cluster to expose the service on (auto: where replicas run).")
@common
@pass_state
def create_service(state: CliState, /, name: str, namespace: str | None, dry_run: bool,
                   **flags: Any) -> None:
    """Create a service: a stable address for the replicas a selector picks.

    \b
    Examples:
      skyctl create service web -t LoadBalancer -s app web -p 80 8080
      skyctl create service api --service_type ClusterIP --ports 80 8080 --cluster kind-1
    """
    flags["service_type"] = {"clusterip": "ClusterIP", "nodeport": "NodePort",
                             "loadbalancer": "LoadBalancer"}[flags["service_type"].lower()]
    manifest = manifests.service_manifest(name, namespace=state.namespace(namespace), **flags)
    submit(state, manifest, dry_run)


@create.aliased("filterPolicy", "filterpolicy", "filterPolicies", "filterpolicies", "fp")
@click.argument("name", type=NAME)
@namespace_option
@click.option("--labelSelector", "-l", "label_selector", type=PAIR, multiple=True,
              callback=unique_pairs, metavar="KEY VALUE",
              help="Apply to jobs with this label (repeatable).")
@click.option("--includeCluster", "-i", "include", multiple=True, metavar="CLUSTER",
              help="Allow only these clusters (repeatable).")
@click.option("--excludeCluster", "-e", "exclude", multiple=True, metavar="CLUSTER",
              help="Never use these clusters (repeatable).")
@common
@pass_state
def create_filter_policy(state: CliState, /, name: str, namespace: str | None, dry_run: bool,
                         **flags: Any) -> None:
    """Keep a namespace's (labelled) jobs on, or off, named clusters.

    \b
    Example:
      skyctl create filterPolicy prod-only -l env prod -i cluster-a -e cluster-b
    """
    manifest = manifests.filter_policy_manifest(
        name, namespace=state.namespace(namespace), **flags
    )
    submit(state, manifest, dry_run)


@create.aliased("link", "links")
@click.argument("name", type=NAME)
@click.option("--source", "-s", required=True, help="Source cluster.")
@click.option("--target", "-t", required=True, help="Target cluster.")
@click.option("--gateway", "-g", default=None, metavar="HOST:PORT",
              help="Where the source cluster reaches the target (default: directly).")
@common
@pass_state
def create_link(state: CliState, /, name: str, source: str, target: str, gateway: str | None,
                dry_run: bool) -> None:
    """Say how two clusters reach each other; its status says whether they can (Ready, or
    Error and why: a cluster missing or not Ready, a gateway refusing the source cluster).

    \b
    Examples:
      skyctl create link a-to-b --source cluster-a --target cluster-b
      skyctl create link edge --source dc1 --target cloud1 --gateway gw.example.com:443
      skyctl get links -o wide
    """
    manifest = manifests.link_manifest(name, source=source, target=target, gateway=gateway)
    submit(state, manifest, dry_run)


@create.aliased("endpoints", "endpoint", "edp", "edps")
@click.argument("name", type=NAME)
@namespace_option
@click.option("--num_endpoints", type=click.IntRange(min=0), default=None,
              help="Number of endpoints on the primary cluster.")
@click.option("--exposed", is_flag=True,
              help="Mark the endpoints as exposed to --primary_cluster (which must be named).")
@click.option("--primary_cluster", default="auto", show_default=True,
              help="Cluster the endpoints belong to; 'auto' leaves it to SkyShift and cannot "
                   "be combined with --exposed.")
@click.option("--selector", type=PAIR, multiple=True, metavar="KEY VALUE",
              callback=unique_pairs, help="Select replicas by label (repeatable).")
@common
@pass_state
def create_endpoints(state: CliState, /, name: str, namespace: str | None, dry_run: bool,
                     **flags: Any) -> None:
    """Create endpoints: per cluster, how many replicas match a selector.

    \b
    Example:
      skyctl create endpoints web --num_endpoints 3 --exposed --primary_cluster kind-1
    """
    manifest = manifests.endpoints_manifest(name, namespace=state.namespace(namespace), **flags)
    submit(state, manifest, dry_run)


@create.aliased("role", "roles")
@click.argument("name", type=NAME)
@click.option("--action", "-a", "actions", multiple=True,
              help="Allowed action: create, get, list, update, patch, delete, watch or *.")
@click.option("--resource", "-r", "resources", multiple=True,
              help="Kind the rule covers, e.g. jobs (repeatable).")
@click.option("--namespace", "-n", "namespaces", multiple=True,
              help="Namespace the role applies in (repeatable).")
@click.option("--users", "-u", multiple=True, help="User holding the role (repeatable).")
@common
@pass_state
def create_role(state: CliState, /, name: str, dry_run: bool, **flags: Any) -> None:
    """Create a role: which users may do which actions on which kinds, in which namespaces.

    \b
    Example:
      skyctl create role dev -a get -a list -r jobs -n dev -u alice
    """
    submit(state, manifests.role_manifest(name, **flags), dry_run)


@create.aliased("namespace", "namespaces", "ns")
@click.argument("name", type=NAME)
@common
@pass_state
def create_namespace(state: CliState, /, name: str, dry_run: bool) -> None:
    """Create a namespace.

    \b
    Example:
      skyctl create namespace dev
    """
    submit(state, manifests.namespace_manifest(name), dry_run)
