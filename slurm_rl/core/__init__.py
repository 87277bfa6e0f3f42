"""Shared by every stage: errors, the spec, job dir paths, the job manifest, events, exits, the SLURM client, process discovery."""
