"""The name of every activity: the one string its ``@activity.defn`` and every caller share.

Workflows call activities by these constants (``workflow.execute_activity(act.SUBMIT_REPLICAS,
...)``) and the activities are defined under the same ones, so a misspelt name fails mypy and
the import instead of scheduling an activity no worker has. Like every name in the contract, a value
here is in recorded histories: renaming one breaks running workflows.
"""

from __future__ import annotations

# on a skylet queue: the cluster's manager (activities/clusters.py, sync.py, services.py, links.py)
SUBMIT_REPLICAS = "submit_replicas"
DELETE_REPLICAS = "delete_replicas"
TEARDOWN_CLUSTER = "teardown_cluster"
REPLICA_OP = "replica_op"
SYNC_CLUSTER = "sync_cluster"
APPLY_SERVICE = "apply_service"
REPLICA_ADDRESSES = "replica_addresses"
DELETE_SERVICE = "delete_service"
PROBE_TCP = "probe_tcp"

# the object store (activities/store.py, service_store.py, links.py)
WRITE_JOB_STATUS = "write_job_status"
READ_JOB = "read_job"
REMOVE_OBJECT = "remove_object"
WRITE_CLUSTER_STATUS = "write_cluster_status"
NOTIFY_CLUSTER_JOBS = "notify_cluster_jobs"
READ_SERVICE = "read_service"
SERVICE_VIEW = "service_view"
WRITE_SERVICE_STATUS = "write_service_status"
WRITE_ENDPOINTS = "write_endpoints"
VIEW_LINK = "view_link"
WRITE_LINK_STATUS = "write_link_status"

# submit orders (activities/orders.py): written and withdrawn by the control worker, carried
# out by the skylet (activities/order_runner.py)
POST_SUBMIT_ORDER = "post_submit_order"
WITHDRAW_SUBMIT_ORDERS = "withdraw_submit_orders"

# the scheduler (activities/scheduling.py)
ENQUEUE_JOB = "enqueue_job"
DEQUEUE_JOB = "dequeue_job"
PLACE_BATCH = "place_batch"

# provisioning (activities/provisioning.py)
PROVISION_CLUSTER = "provision_cluster"
UNPROVISION_CLUSTER = "unprovision_cluster"
CLUSTER_USAGE = "cluster_usage"

# pipelines (activities/pipelines.py)
START_STEP = "start_step"
READ_STEP_JOBS = "read_step_jobs"
DELETE_OWNED = "delete_owned"
WRITE_PIPELINE_STATUS = "write_pipeline_status"
READ_PIPELINE = "read_pipeline"

# schedules (activities/schedules.py)
SYNC_SCHEDULE = "sync_schedule"
DROP_SCHEDULE = "drop_schedule"
START_RUN = "start_run"
READ_RUN = "read_run"
STOP_RUN = "stop_run"
