"""The Temporal contract: everything SkyShift's processes must agree on to talk through Temporal.

- :mod:`.names`: task queues, workflow types and ids, signals, queries, search attributes;
- :mod:`.activity_names`: the name of every activity;
- payloads, one module per lifecycle: :mod:`.jobs` (jobs, clusters, the scheduler, skylets),
  :mod:`.services`, :mod:`.links`, :mod:`.pipelines` (pipelines and schedules),
  :mod:`.provision` (provisioned clusters);
- how a process connects to Temporal (client, data converter): :mod:`skyshift.lifecycle`.

Everything that crosses a Temporal boundary (workflow input, signal, query, activity argument or
result) is one plain dataclass defined here, so the API, the workflows, the activities and the
workers agree on one definition and Temporal's default JSON converter round-trips it. Rules:
only str/int/float/bool/None, lists, dicts and nested dataclasses; every field added later gets
a default so histories recorded with older payloads still decode (the replay tests under
tests/workflows/histories/ check this). Names are part of recorded histories too: never rename.

The package sits below activities and workflows and above compat/scheduler/store (whose plain
types some payloads carry); it does no I/O.
"""
