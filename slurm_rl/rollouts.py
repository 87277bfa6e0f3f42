"""``slurm_rl.rollouts``: NeMo Gym-style verification and rollout collection over a job's nodes
(``verify``, ``Verdict``, ``RolloutPool``); implemented in slurm_rl/distributed/rollouts/."""

from .distributed.rollouts.pool import RolloutPool, Verdict, verify

__all__ = ["RolloutPool", "Verdict", "verify"]
