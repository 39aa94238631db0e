"""Parameters of pipelines: ``{{ params.NAME }}`` substituted into a step's job template.

Substitution is plain text replacement in every string of the template (keys are left alone),
then the result is validated as a Job spec, so the error of a bad value names the step field.
A reference to a parameter that is not declared is an error; nothing else is evaluated.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, ValidationError

from skyshift.models.job import JobSpec

_PARAM = re.compile(r"\{\{\s*params\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
MAX_VALUE = 4096
#: a string of a step's job after substitution (a 4 KiB value referenced many times must not
#: turn a small manifest into megabytes)
MAX_RENDERED = 65_536


def _param_name(v: str) -> str:
    if not _NAME.fullmatch(v):
        raise ValueError(
            f"parameter name {v!r}: use letters, digits and '_', not starting with a digit"
        )
    return v


ParamName = Annotated[str, AfterValidator(_param_name)]


def substitute(value: Any, params: dict[str, str], where: str) -> Any:
    """``value`` with every ``{{ params.X }}`` in its strings replaced (recursively)."""
    if isinstance(value, str):
        size = len(value)
        for m in _PARAM.finditer(value):  # check names and the final size before building it
            name = m.group(1)
            if name not in params:
                known = ", ".join(sorted(params)) or "none declared"
                raise ValueError(f"{where}: unknown parameter {name!r} (parameters: {known})")
            size += len(params[name]) - len(m.group(0))
        if size > MAX_RENDERED:
            raise ValueError(f"{where}: {size} characters once parameters are substituted "
                             f"(at most {MAX_RENDERED})")
        return _PARAM.sub(lambda m: params[m.group(1)], value)
    if isinstance(value, dict):
        return {k: substitute(v, params, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, params, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def render_template(job: dict[str, Any], params: dict[str, str], where: str) -> dict[str, Any]:
    """The step's job spec with parameters substituted, validated as a JobSpec (as a dict)."""
    for name, value in params.items():
        if len(value) > MAX_VALUE:
            raise ValueError(f"parameters.{name}: longer than {MAX_VALUE} characters")
    rendered = substitute(job, params, where)
    try:
        spec = JobSpec.model_validate(rendered)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}{'.' + loc if loc else ''}: {first['msg']}") from None
    out: dict[str, Any] = spec.model_dump(mode="json", exclude_none=True)
    return out
