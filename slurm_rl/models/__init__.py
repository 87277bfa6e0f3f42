"""NeMo RL's ``nemo_rl.models`` names that slurm-rl's placement needs (the engines themselves,
vLLM and the policies, are the user's: slurm-rl installs neither)."""
