"""A driver that only attaches to the job's Ray cluster: measures bring-up and job overhead."""

import ray

from slurm_rl.distributed import init_ray

init_ray()
print(f"connected: {len([n for n in ray.nodes() if n['Alive']])} nodes")
