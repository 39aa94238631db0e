"""Keep local replicas off the control plane's ports: one nftables table per stack.

The Temporal dev server has no authentication, etcd's peer port has none either, and whoever
reaches Temporal can act as the control plane (docs/security.md). Replicas of the ``local``
cluster, and the simulated Ray heads, run as users whose primary group is ``skyshift-run``
(:mod:`skyshift.compat.local.tenants`), so one rule on the output hook keyed on the socket's
group (``meta skgid``) refuses their connections to every port the stack listens on, except the
API (which authenticates). The kernel answers with a TCP reset, so a probe sees "connection
refused" at once.

The ports are the ones the stack actually uses: the configured ones (etcd client and peer,
Temporal gRPC and UI) plus every TCP or UDP socket the stack's processes listen on when ``up``
has finished (the dev server's internal services and membership ports, the workers' and the
API's metrics listeners), found in ``/proc``. The table is named after the stack's home
(``inet skyshift_<hash>``), replaced atomically on every ``up`` and deleted by ``down``, so
stacks on one host never touch each other's rules. A table's comment names its home: a stack
that died without ``down`` (killed, its home removed) leaves a table whose ports the next stacks
may well listen on, and would refuse their replicas their own API; every ``up`` removes the
tables of stacks that no longer run (:func:`prune`).

Why nftables and not a network namespace per replica: replicas must keep reaching the API, each
other's host ports and the services' HAProxy addresses on loopback; a netns would need a veth,
addresses and routes per replica and would change what ``127.0.0.1`` means to a job. Owner match
on the output hook needs only ``nft`` and one table.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

TABLE_PREFIX = "skyshift_"
_LISTEN = {"tcp": "0A", "tcp6": "0A", "udp": "07", "udp6": "07"}  # TCP LISTEN, UDP unconnected


class FirewallError(Exception):
    """``nft`` is missing or refused the rules (the message says which and why)."""


def table_name(home: Path) -> str:
    digest = hashlib.sha256(str(home.absolute()).encode()).hexdigest()[:12]
    return f"{TABLE_PREFIX}{digest}"


def nft_binary() -> str | None:
    return shutil.which("nft", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")


def _listening_inodes() -> dict[int, int]:
    """socket inode -> local port of every listening TCP and unbound-peer UDP socket."""
    out: dict[int, int] = {}
    for name, state in _LISTEN.items():
        try:
            rows = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == state:
                out[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    return out


def _group_members(groups: set[int]) -> list[int]:
    """Pids of the processes in these process groups (a component leads its own group)."""
    pids: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) in groups:
            pids.append(int(entry.name))
    return pids


def listening_ports(groups: Iterable[int]) -> set[int]:
    """Ports the processes of these process groups listen on (TCP, or UDP without a peer)."""
    inodes = _listening_inodes()
    ports: set[int] = set()
    for pid in _group_members(set(groups)):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                port = inodes.get(int(target[8:-1]))
                if port:
                    ports.add(port)
    return ports


def _comment(home: Path | None) -> list[str]:
    """The table's comment line naming ``home`` (none for a path nft cannot quote)."""
    text = str(home.absolute()) if home is not None else ""
    if not text or '"' in text or "\n" in text or len(text.encode()) > 127:
        return []
    return [f'  comment "{text}"']


def ruleset(table: str, gid: int, ports: Iterable[int], home: Path | None = None) -> str:
    """The nft script that (re)creates ``table`` refusing group ``gid`` these local ports,
    its comment naming the stack's ``home``."""
    listed = ", ".join(str(p) for p in sorted(set(ports)))
    rule = (f"meta skgid {gid} fib daddr type local meta l4proto {{ tcp, udp }} "
            f"th dport {{ {listed} }} counter reject")  # fmt: skip
    tcp_rule = (f"meta skgid {gid} fib daddr type local tcp dport {{ {listed} }} "
                "counter reject with tcp reset")  # fmt: skip
    return "\n".join([
        f"table inet {table}",  # so that the delete below never fails
        f"delete table inet {table}",
        f"table inet {table} {{",
        *_comment(home),
        "  chain output {",
        "    type filter hook output priority filter; policy accept;",
        f"    {tcp_rule}",
        f"    {rule}",
        "  }",
        "}",
        "",
    ])  # fmt: skip


def install(home: Path, gid: int, ports: Iterable[int]) -> str:
    """Replace this stack's table in one transaction; returns the table's name."""
    nft = nft_binary()
    if nft is None:
        raise FirewallError("nft is not installed (apt-get install nftables, or ./dev install)")
    table = table_name(home)
    script = ruleset(table, gid, ports, home)
    done = subprocess.run([nft, "-f", "-"], input=script, capture_output=True, text=True,
                          timeout=30)  # fmt: skip
    if done.returncode != 0:
        raise FirewallError(f"nft refused the rules: {(done.stderr or done.stdout).strip()}")
    return table


def _nft(nft: str, *args: str) -> str | None:
    done = subprocess.run([nft, *args], capture_output=True, text=True, timeout=30)
    return done.stdout if done.returncode == 0 else None


def tables() -> dict[str, Path | None]:
    """Every stack's table on this host and the home its comment names (None: no comment, a
    table written before tables named their home)."""
    nft = nft_binary()
    listed = _nft(nft, "list", "tables", "inet") if nft else None
    found: dict[str, Path | None] = {}
    for line in (listed or "").splitlines():
        name = line.split()[-1] if line.startswith("table inet ") else ""
        if not name.startswith(TABLE_PREFIX) or nft is None:
            continue
        home: Path | None = None
        for row in (_nft(nft, "list", "table", "inet", name) or "").splitlines():
            row = row.strip()
            if row.startswith('comment "') and row.endswith('"'):
                home = Path(row[len('comment "'):-1])
                break
        found[name] = home
    return found


def prune(running: Callable[[Path], bool], keep: Path) -> list[str]:
    """Delete the tables of stacks that no longer run (``running(home)`` is false, or the
    table names no home), never ``keep``'s; returns the tables deleted."""
    nft = nft_binary()
    gone: list[str] = []
    mine = table_name(keep)
    for name, home in tables().items():
        if nft is None or name == mine or (home is not None and running(home)):
            continue
        if _nft(nft, "delete", "table", "inet", name) is not None:
            gone.append(name)
    return gone


def remove(home: Path) -> bool:
    """Delete this stack's table; whether there was one."""
    nft = nft_binary()
    if nft is None:
        return False
    done = subprocess.run([nft, "delete", "table", "inet", table_name(home)],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    return done.returncode == 0


def current_ports(home: Path) -> set[int] | None:
    """The ports this stack's table refuses now (None: no table, or no nft)."""
    nft = nft_binary()
    if nft is None:
        return None
    done = subprocess.run([nft, "list", "table", "inet", table_name(home)],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    if done.returncode != 0:
        return None
    ports: set[int] = set()
    for line in done.stdout.splitlines():
        if "dport" in line:
            listed = line.split("dport", 1)[1].split("counter", 1)[0]
            ports |= {int(w) for w in listed.replace("{", " ").replace("}", " ")
                      .replace(",", " ").split() if w.isdigit()}  # fmt: skip
    return ports
