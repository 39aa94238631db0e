"""The local cluster manager."""
