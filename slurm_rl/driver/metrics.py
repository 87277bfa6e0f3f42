"""``slurm_rl.MetricsLog(dir).log(step=..., reward=...)``: one JSON line per call in
``metrics.jsonl`` of the job dir, stamped with the wall time and the job attempt, appended (a
requeued attempt continues the same file). ``slurm-rl plot`` draws it.

The same numbers go where RL teams read them:
- TensorBoard event files in ``<dir>/tensorboard/`` (the ``tensorboard`` package's format,
  written by ``torch.utils.tensorboard``): ``tensorboard --logdir <dir>/tensorboard``;
- Weights & Biases, when ``wandb`` is installed and configured (``WANDB_API_KEY``, or
  ``WANDB_MODE=offline``): one run per job, resumed by every attempt, with the job id,
  attempt, job name and sweep task in its config; its files stay in the job dir.
Numbers only (ints, floats, 0-d tensors); everything else is in ``metrics.jsonl`` alone.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from pathlib import Path
from typing import Any

from ..core.job_env import JobEnvironment
from ..core.paths import JobPaths
from .heartbeat import step_progress

TENSORBOARD_DIR = "tensorboard"


def scalars(values: dict[str, Any]) -> dict[str, float]:
    """The numeric entries of a ``log`` call (booleans and the step itself left out)."""
    out = {}
    for key, value in values.items():
        if key == "step" or isinstance(value, bool):
            continue
        if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
            value = value.item()
        if isinstance(value, (int, float)):
            out[key] = float(value)
    return out


def wandb_configured(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    if not (environ.get("WANDB_API_KEY") or environ.get("WANDB_MODE") in ("offline", "online", "dryrun")):
        return False
    if environ.get("WANDB_MODE") == "disabled":
        return False
    try:
        import wandb  # noqa: F401
    except ImportError:
        return False
    return True


class MetricsLog:
    def __init__(self, job_dir: str | os.PathLike[str], tensorboard: bool = True, wandb: bool | None = None) -> None:
        """``wandb=None``: W&B when it is installed and configured; ``False``: never."""
        self.path = JobPaths(Path(job_dir)).metrics
        env = JobEnvironment.current()
        self.attempt = env.attempt
        self._tensorboard = tensorboard
        self._writer: Any = None
        self._wandb_run: Any = None
        self._use_wandb = wandb_configured() if wandb is None else wandb
        self._run_info = {
            "slurm_job_id": env.job_id or "",
            "attempt": self.attempt,
            "job_name": env.job_name,
            "sweep_task": env.array_task.split("_")[1] if env.array_task else "",
        }

    def event(self, name: str, **fields: Any) -> None:
        """A moment worth a mark on the timeline (e.g. ``workers_ready``): events.jsonl."""
        from ..core.events import append_event

        append_event(JobPaths(self.path.parent).events, name, attempt=self.attempt, **fields)

    def log(self, **values: Any) -> None:
        line = json.dumps({"t": round(time.time(), 3), "attempt": self.attempt, **values}, default=str)
        with open(self.path, "a") as f:
            f.write(line + "\n")
        step_progress(self.path.parent, values)  # a metrics line is progress (core/progress.py)
        numbers = scalars(values)
        if not numbers:
            return
        step = values.get("step")
        step = int(step) if isinstance(step, (int, float)) and not isinstance(step, bool) else None
        if self._tensorboard:
            writer = self._tensorboard_writer()
            for key, value in numbers.items():
                writer.add_scalar(key, value, global_step=step)
            writer.flush()
        if self._use_wandb:
            self._wandb().log(numbers, step=step)

    def close(self) -> None:
        """Flush and close the writers (also done at exit)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._wandb_run is not None:
            self._wandb_run.finish()
            self._wandb_run = None

    def _tensorboard_writer(self) -> Any:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(self.path.parent / TENSORBOARD_DIR))
            atexit.register(self.close)
        return self._writer

    def _wandb(self) -> Any:
        if self._wandb_run is None:
            import wandb

            job_id = self._run_info["slurm_job_id"]
            self._wandb_run = wandb.init(
                project=os.environ.get("WANDB_PROJECT", "slurm-rl"),
                name=f"{self._run_info['job_name'] or 'run'}-{job_id}" if job_id else None,
                id=f"slurm-{job_id}" if job_id else None,
                resume="allow" if job_id else None,  # a requeued attempt continues the job's run
                dir=str(self.path.parent),
                config=self._run_info,
            )
            atexit.register(self.close)
        return self._wandb_run


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a kill: the rest is still good
    return rows
