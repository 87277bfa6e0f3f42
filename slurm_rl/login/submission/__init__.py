"""A submission, from what the user typed to the job in SLURM's queue: options resolved once
(resolve.py, flags.py), the plan (plan.py), what would fail before the queue (preflight.py,
parts_preflight.py), the script (directives.py, render.py, parts_render.py), then staged and
submitted (submit.py, chain.py, snapshot.py) under the user's own dir (user_dir.py)."""
