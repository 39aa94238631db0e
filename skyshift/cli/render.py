"""Plain-text formatting shared by the commands: ages, quantities and aligned tables.

Tables are laid out here (not by rich) so that output is stable in pipes and tests, watch mode
can print rows one at a time under a header, and multi-line cells (the RESOURCES column of the
original SkyShift) keep their columns aligned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

GAP = 3
NONE = "<none>"


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp (``...Z`` or with an offset) or epoch seconds -> aware datetime."""
    if value is None or value == "":
        return None
    try:
        if isinstance(value, int | float):
            return datetime.fromtimestamp(float(value), tz=UTC)
        text = str(value).strip()
        if text.replace(".", "", 1).isdigit():
            return datetime.fromtimestamp(float(text), tz=UTC)
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_age(created: object, now: datetime | None = None) -> str:
    """kubectl-style age: ``5s``, ``3m``, ``2h``, ``4d``, ``2y``; ``<unknown>`` if unparsable."""
    when = parse_time(created)
    if when is None:
        return "<unknown>"
    seconds = int(((now or datetime.now(UTC)) - when).total_seconds())
    seconds = max(seconds, 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    if seconds < 365 * 86400:
        return f"{seconds // 86400}d"
    return f"{seconds // (365 * 86400)}y"


def fmt_num(value: float) -> str:
    """``4.0`` -> ``4``, ``0.5`` -> ``0.5``, ``15.2500001`` -> ``15.25``."""
    return f"{round(float(value), 2):g}"


def fmt_memory(mb: float) -> str:
    """Memory held in MB, shown in MB below 1 GB and in GB above (decimal units)."""
    mb = float(mb)
    if abs(mb) >= 1000:
        return f"{fmt_num(mb / 1000)} GB"
    return f"{fmt_num(mb)} MB"


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]}
_CONTROL_KEEP_NL = {c: e for c, e in _CONTROL.items() if c != 0x0A}


def printable(text: object, keep_newlines: bool = False) -> str:
    """``text`` with control characters (C0, DEL, C1) shown as ``\\x1b`` instead of sent to
    the terminal: labels, messages and reasons come from users and clusters, and an escape
    sequence in them would otherwise drive the reader's terminal (colours, title, worse)."""
    return str(text).translate(_CONTROL_KEEP_NL if keep_newlines else _CONTROL)


def fmt_labels(labels: Mapping[str, Any] | None, sep: str = ",") -> str:
    if not labels:
        return NONE
    return sep.join(printable(f"{k}={v}") for k, v in labels.items())


def fmt_list(values: Sequence[Any] | None) -> str:
    return ",".join(str(v) for v in values) if values else NONE


def _num(value: object) -> float:
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return 0.0


def sum_nodes(per_node: Mapping[str, Any] | None) -> dict[str, float]:
    """Sum a ``{node: {cpus, memory, gpus, disk, accelerators: {...}}}`` map over nodes.

    Accelerators are flattened next to the base resources (``{"cpus": 8, "A100": 2}``).
    """
    total: dict[str, float] = {}
    for res in (per_node or {}).values():
        if not isinstance(res, Mapping):
            continue
        for key, value in res.items():
            if key == "accelerators" and isinstance(value, Mapping):
                for acc, count in value.items():
                    total[str(acc)] = total.get(str(acc), 0.0) + _num(count)
            else:
                total[key] = total.get(key, 0.0) + _num(value)
    return total


def fmt_amount(key: str, value: float) -> str:
    return fmt_memory(value) if key in ("memory", "disk") else fmt_num(value)


BASE_ORDER = ("cpus", "memory", "gpus", "disk")


def _ordered(keys: Sequence[str] | set[str]) -> list[str]:
    keys = set(keys)
    return [k for k in BASE_ORDER if k in keys] + sorted(k for k in keys if k not in BASE_ORDER)


def fmt_ratio(part: Mapping[str, float], whole: Mapping[str, float]) -> str:
    """``cpus: 3.5/4`` lines for every resource with a non-zero total (``{}`` when none)."""
    lines = [
        f"{k}: {fmt_amount(k, part.get(k, 0.0))}/{fmt_amount(k, whole[k])}"
        for k in _ordered(set(whole))
        if whole.get(k)
    ]
    return "\n".join(lines) or "{}"


def fmt_request(resources: Mapping[str, Any] | None) -> str:
    """A job's per-replica request as ``cpus: 1`` lines, zeros left out."""
    flat: dict[str, float] = {}
    for key, value in (resources or {}).items():
        if key == "accelerators" and isinstance(value, Mapping):
            flat.update({str(k): _num(v) for k, v in value.items()})
        else:
            flat[key] = _num(value)
    lines = [f"{k}: {fmt_amount(k, flat[k])}" for k in _ordered(set(flat)) if flat[k]]
    return "\n".join(lines) or "{}"


@dataclass
class Table:
    """Rows of string cells under a header; cells may span several lines."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    status_col: int | None = None

    def widths(self) -> list[int]:
        out = [len(h) for h in self.headers]
        for row in self.rows:
            for i, cell in enumerate(row):
                out[i] = max(out[i], *(len(printable(p)) for p in cell.split("\n")))
        return out

    def header_line(self, widths: Sequence[int]) -> str:
        return join_cells(self.headers, widths)

    def row_lines(self, row: Sequence[str], widths: Sequence[int]) -> list[str]:
        return row_lines(row, widths)

    def render(self) -> str:
        widths = self.widths()
        lines = [self.header_line(widths)]
        for row in self.rows:
            lines.extend(row_lines(row, widths))
        return "\n".join(lines)


def join_cells(cells: Sequence[str], widths: Sequence[int]) -> str:
    parts = [c.ljust(w) for c, w in zip(cells, widths, strict=False)]
    return (" " * GAP).join(parts).rstrip()


def row_lines(row: Sequence[str], widths: Sequence[int]) -> list[str]:
    """A row as one or more lines (multi-line cells stack, other cells stay on the first)."""
    split = [[printable(part) for part in cell.split("\n")] for cell in row]
    height = max((len(s) for s in split), default=1)
    return [
        join_cells([s[i] if i < len(s) else "" for s in split], widths) for i in range(height)
    ]
