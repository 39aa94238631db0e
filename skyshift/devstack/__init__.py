"""devstack package."""
