"""workflows package."""
