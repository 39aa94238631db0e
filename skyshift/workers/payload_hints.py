"""Cache the type hints temporalio looks up for every dataclass payload it decodes.

temporalio's JSON converter calls ``typing.get_type_hints`` on a dataclass each time it decodes
one, and evaluates every field annotation again: about 7% of the control worker's CPU during a
burst of new jobs (py-spy, bench/lifecycle.py). A class's hints never change once it is defined,
so workers install this cache at start. It wraps the one name the converter module imported; if
a future temporalio no longer has it, nothing is patched and decoding works as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)
_MARK = "_skyshift_cached"


def cached(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``original`` with results remembered per (hashable) object when called with it alone."""
    cache: dict[Any, dict[str, Any]] = {}

    def hints(obj: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if args or kwargs:
            return original(obj, *args, **kwargs)
        try:
            return cache[obj]
        except KeyError:
            found = cache[obj] = original(obj)
            return found
        except TypeError:  # unhashable: nothing to remember it by
            return original(obj)

    setattr(hints, _MARK, True)
    return hints


def install() -> bool:
    """Patch temporalio's payload converter; True when the cache is in place."""
    try:
        from temporalio.converter import _payload_converter as module
    except ImportError:
        return False
    original = getattr(module, "get_type_hints", None)
    if original is None:
        log.info("temporalio has no get_type_hints in its converter; payload hints not cached")
        return False
    if not getattr(original, _MARK, False):
        setattr(module, "get_type_hints", cached(original))  # noqa: B010 (private name)
    return True
