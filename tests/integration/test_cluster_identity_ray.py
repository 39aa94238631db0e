"""One Ray head is never attached twice (issue 31): two Cluster objects on the same real head,
one by 127.0.0.1 and one by localhost, and only the first is Ready (the head's session names
it, not the URL). See test_cluster_identity.py for the other managers."""

from __future__ import annotations

from typing import Any

from skyshift.compat.base import create_manager
from skyshift.store import ObjectStore
from tests.integration.test_cluster_identity import attach_twice

pytest_plugins = ["tests.fixtures.ray"]


async def test_two_clusters_on_one_ray_head(store: ObjectStore, ray_cluster: Any):
    config = ray_cluster.adapter_config()
    other = dict(config, address=config["address"].replace("127.0.0.1", "localhost"))
    _, obj_b = await attach_twice(store, "ray", create_manager("first", "ray", config),
                                  create_manager("second", "ray", other))
    assert obj_b["status"]["identity"].startswith("ray:session=")
