"""What several cluster managers' adapters share, and no manager owns: the "can never fit"
check of batch managers (``fit``) and the per-name locks around an idempotent submit
(``name_locks``). The contract every adapter meets (``ClusterManager``, its types and errors)
stays at ``compat/`` top; the manager subpackages import from both, never from each other."""
