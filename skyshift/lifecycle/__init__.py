"""The Temporal front door: how SkyShift's processes connect to Temporal and start or signal
lifecycle workflows.

- :mod:`.client` and :mod:`.converter`: the client every process connects with, and its data
  converter;
- :mod:`.convert`, :mod:`.pipeline_convert`, :mod:`.service_convert`: stored objects turned into
  the contract's workflow inputs (pure functions; :mod:`.envs` keeps env values out of them);
- :mod:`.starter`: signal-with-start of every lifecycle, replica ops, Temporal Schedule actions.

The API, the control worker's reconciler, the activities that spawn objects and the workflows
(which use the pure converters only) all come through here. It sits below workflows and
activities and above the contract: it never imports either of them.
"""
