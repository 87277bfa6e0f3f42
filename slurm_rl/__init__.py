"""slurm-rl: one Ray cluster per SLURM job, torn down completely when the job ends."""

__version__ = "0.1.0"
