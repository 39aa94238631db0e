"""SkyShift: run containers across many clusters as one, with durable Temporal lifecycles."""

__version__ = "0.1.0"
