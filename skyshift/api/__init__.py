"""The API server: a stateless FastAPI app over the etcd object store (see ``app``)."""

from skyshift.api.app import ApiOptions, create_app
from skyshift.api.lifecycle import Lifecycle, TemporalLifecycle

__all__ = ["ApiOptions", "Lifecycle", "TemporalLifecycle", "create_app"]
