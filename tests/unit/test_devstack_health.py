"""The Temporal health check says "not healthy yet" when the server is slow to answer.

On a busy machine the first connect to a just-started Temporal dev server can outlast the check's
timeout; the TimeoutError has no text, and the check used to crash ``skyshift up`` with
IndexError instead of trying again.
"""

from __future__ import annotations

import socket

from skyshift.devstack.components import TemporalHealth
from skyshift.devstack.health import check_temporal


def test_a_server_that_never_answers_is_not_healthy_yet() -> None:
    with socket.socket() as silent:  # accepts TCP connections (backlog), never speaks gRPC
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        result = check_temporal(TemporalHealth(f"127.0.0.1:{port}"))
    assert not result.ok
    assert f"127.0.0.1:{port}" in result.detail
