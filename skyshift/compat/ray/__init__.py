"""The ray cluster manager."""
