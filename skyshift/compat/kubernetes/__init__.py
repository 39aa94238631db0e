"""The kubernetes cluster manager."""
