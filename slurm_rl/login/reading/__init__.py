"""What reads jobs back after submission: finding a job (lookup.py, index.py), how it is doing
and how it ended (summary.py, waiting.py), the tables of `status` and `list` (job_tables.py),
following its logs (follow.py), its results and pictures (results.py, plots.py), a sweep's
report (sweep_report.py)."""
