"""compat package."""
