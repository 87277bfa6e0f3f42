"""``python -m slurm_rl``: the `slurm-rl` command line."""

from .laptop.cli import main

main()
