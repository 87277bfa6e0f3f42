"""NeMo Gym's pattern: stateless verification spread over every node and a resumable rollout
pool (``slurm_rl.rollouts`` is the public path)."""
