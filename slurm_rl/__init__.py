"""slurm-rl: one Ray cluster per SLURM job, torn down completely when the job ends."""

__version__ = "0.1.0"


def on_preempt(callback):  # type: ignore[no-untyped-def]
    """Register a callback for SLURM's warning signal (see slurm_rl.preempt.on_preempt)."""
    from .preempt import on_preempt as _on_preempt

    _on_preempt(callback)
