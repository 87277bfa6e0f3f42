"""Runs in the driver process of a job: time-limit warnings and requeue requests (preempt), the
metrics log (metrics), and the driver of a submitted Python function (call)."""
