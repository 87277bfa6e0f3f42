"""``python -m slurm_rl``: the `slurm-rl` command line."""

from .login.cli import main

main()
