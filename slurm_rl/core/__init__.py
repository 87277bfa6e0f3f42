"""Shared by every stage: errors, the spec, the job options and manifest, the job environment,
job dir paths, events, exits, the SLURM client, process discovery."""
