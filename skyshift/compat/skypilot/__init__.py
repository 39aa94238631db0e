"""The skypilot cluster manager."""
