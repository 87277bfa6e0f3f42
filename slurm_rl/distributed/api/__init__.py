"""NeMo RL's ``nemo_rl.distributed`` API, implemented: placement (virtual_cluster), worker
creation (worker_builder), the group and its dispatch (worker_group, worker_dispatch), the data
containers (batched_data_dict, named_sharding) and attaching the driver (ray_init). Runs in the
driver. Users import the public paths one level up (``slurm_rl.distributed.worker_groups``, ...)."""
