"""The slurm cluster manager."""
