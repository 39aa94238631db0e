"""Resource quantities: parsing user input and arithmetic on plain dataclasses.

Kept free of pydantic so the scheduler, the compat adapters and Temporal payloads can all use the
same ``Resources`` value. Memory is always held in MB (the original SkyShift's unit).
"""


import math
import re
from dataclasses import dataclass, field

_MEM_UNITS: dict[str, float] = {
    "": 1.0,
    "m": 1.0,
    "mb": 1.0,
    "k": 1e3 / 1e6,
    "kb": 1e3 / 1e6,
    "ki": 1024 / 1e6,
    "kib": 1024 / 1e6,
    "g": 1e3,
    "gb": 1e3,
    "t": 1e6,
    "tb": 1e6,
    "mi": 1024**2 / 1e6,
    "mib": 1024**2 / 1e6,
    "gi": 1024**3 / 1e6,
    "gib": 1024**3 / 1e6,
    "ti": 1024**4 / 1e6,
    "tib": 1024**4 / 1e6,
}
_QTY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")
_ACC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.\-]*)(?::([0-9]+))?$")


def parse_cpus(value: object) -> float:
    """``2``, ``1.5``, ``"500m"`` (millicores) -> cores. Rejects negatives and junk."""
    if isinstance(value, bool):
        raise ValueError("cpus must be a number or millicores like '500m'")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        m = _QTY.fullmatch(value)
        if not m or m.group(2) not in ("", "m"):
            raise ValueError(
                f"invalid cpus {value!r}: use a number like 2 or millicores like '500m'"
            )
        number = float(m.group(1)) / (1000.0 if m.group(2) == "m" else 1.0)
    else:
        raise ValueError("cpus must be a number or millicores like '500m'")
    if number < 0 or not math.isfinite(number):
        raise ValueError("cpus must be >= 0")
    return number


def parse_memory(value: object) -> float:
    """Memory in MB: plain numbers are MB; ``"4Gi"``, ``"512Mi"``, ``"2G"``, ``"100MB"`` convert."""
    if isinstance(value, bool):
        raise ValueError("memory must be MB or a quantity like '4Gi'")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        m = _QTY.fullmatch(value)
        unit = m.group(2).lower() if m else ""
        if not m or unit not in _MEM_UNITS:
            raise ValueError(
                f"invalid memory {value!r}: use MB (e.g. 512) or a unit like '4Gi', '512Mi', '2G'"
            )
        number = float(m.group(1)) * _MEM_UNITS[unit]
    else:
        raise ValueError("memory must be MB or a quantity like '4Gi'")
    if number < 0 or not math.isfinite(number):
        raise ValueError("memory must be >= 0")
    return number


def parse_accelerators(value: object) -> dict[str, int]:
    """``"A100:2"``, ``"A100:2,T4"``, ``["T4:1"]`` or ``{"A100": 2}`` -> ``{"A100": 2}``."""
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        out: dict[str, int] = {}
        for k, v in value.items():
            if not isinstance(k, str) or not _ACC.fullmatch(k) or ":" in k:
                raise ValueError(f"invalid accelerator type {k!r}")
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"accelerator count for {k} must be an integer >= 0")
            out[k] = v
        return out
    items: list[object]
    if isinstance(value, str):
        items = [p for p in value.split(",") if p.strip()]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ValueError("accelerators must look like 'A100:2'")
    result: dict[str, int] = {}
    for item in items:
        if not isinstance(item, str) or not (m := _ACC.fullmatch(item.strip())):
            raise ValueError(
                f"invalid accelerator {item!r}: expected TYPE or TYPE:COUNT like 'A100:2'"
            )
        result[m.group(1)] = result.get(m.group(1), 0) + int(m.group(2) or 1)
    return result


@dataclass(frozen=True)
class Resources:
    """An amount of compute: cores, MB of memory, GPUs and named accelerators."""

    cpus: float = 0.0
    memory: float = 0.0
    gpus: int = 0
    accelerators: dict[str, int] = field(default_factory=dict)

    def __add__(self, other: "Resources") -> "Resources":
        acc = dict(self.accelerators)
        for k, v in other.accelerators.items():
            acc[k] = acc.get(k, 0) + v
        return Resources(self.cpus + other.cpus, self.memory + other.memory,
                         self.gpus + other.gpus, acc)

    def __sub__(self, other: "Resources") -> "Resources":
        acc = dict(self.accelerators)
        for k, v in other.accelerators.items():
            acc[k] = acc.get(k, 0) - v
        return Resources(self.cpus - other.cpus, self.memory - other.memory,
                         self.gpus - other.gpus, acc)

    def scaled(self, n: int) -> "Resources":
        return Resources(self.cpus * n, self.memory * n, self.gpus * n,
                         {k: v * n for k, v in self.accelerators.items()})

    def fits_in(self, free: "Resources") -> bool:
        """True when this request fits in ``free`` (a tiny epsilon absorbs float noise)."""
        eps = 1e-9
        if self.cpus > free.cpus + eps or self.memory > free.memory + eps:
            return False
        if self.gpus > free.gpus:
            return False
        return all(free.accelerators.get(k, 0) >= v for k, v in self.accelerators.items() if v)

    def shortfall(self, free: "Resources") -> list[str]:
        """Human-readable reasons why this does not fit in ``free`` (empty when it fits)."""
        out: list[str] = []
        if self.cpus > free.cpus + 1e-9:
            out.append(f"cpus: need {self.cpus:g}, free {max(free.cpus, 0):g}")
        if self.memory > free.memory + 1e-9:
            out.append(f"memory: need {self.memory:g}MB, free {max(free.memory, 0):g}MB")
        if self.gpus > free.gpus:
            out.append(f"gpus: need {self.gpus}, free {max(free.gpus, 0)}")
        for k, v in self.accelerators.items():
            if v and free.accelerators.get(k, 0) < v:
                out.append(f"{k}: need {v}, free {max(free.accelerators.get(k, 0), 0)}")
        return out

    def to_dict(self) -> dict[str, object]:
        return {"cpus": self.cpus, "memory": self.memory, "gpus": self.gpus,
                "accelerators": dict(self.accelerators)}

    @classmethod
    def from_dict(cls, data: dict[str, object] | None) -> "Resources":
        data = data or {}
        gpus = data.get("gpus", 0)
        return cls(
            cpus=parse_cpus(data.get("cpus", 0)),
            memory=parse_memory(data.get("memory", 0)),
            gpus=int(gpus) if isinstance(gpus, int | float | str) else 0,
            accelerators=parse_accelerators(data.get("accelerators")),
        )
