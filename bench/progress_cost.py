"""What progress tracking costs a training step: ``MetricsLog.log`` with its progress note (the
file ``progress/driver.json``, written at most once a second, and the stack dump armed once) against the same
call with the note switched off, in the same run (no lab needed).

    python bench/progress_cost.py [--steps 3000]

Goal (issue 58): no measurable change to a step; a real step takes 100 ms to minutes, so
anything under ~1 ms per log() is noise. Not a CI gate."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from unittest import mock

import slurm_rl
from slurm_rl.driver import metrics


def per_call(job_dir: Path, steps: int, with_progress: bool) -> float:
    log = slurm_rl.MetricsLog(job_dir, tensorboard=False, wandb=False)
    patch = mock.patch.object(metrics, "step_progress", lambda *a, **k: None) if not with_progress else None
    with patch or mock.patch.object(metrics, "__name__", metrics.__name__):
        t0 = time.perf_counter()
        for step in range(steps):
            log.log(step=step, loss=1.0 / (step + 1), reward=0.5)
        return (time.perf_counter() - t0) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=3000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        per_call(Path(a), 200, True)  # warm: imports, the first file writes
        base = min(per_call(Path(a), args.steps, False) for _ in range(3))
        tracked = min(per_call(Path(b), args.steps, True) for _ in range(3))
    print(f"MetricsLog.log without the progress note: {base * 1e6:.0f} us per step")
    print(f"MetricsLog.log with it (progress/driver.json at most once a second): {tracked * 1e6:.0f} us per step")
    print(f"with/without: {tracked / base:.2f}x, +{(tracked - base) * 1e6:.0f} us per step")


if __name__ == "__main__":
    main()
