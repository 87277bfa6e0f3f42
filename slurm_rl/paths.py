"""Every path of a job, in one place.

On the shared filesystem: ``<fileroot>/<user>/<name>/<jobid>/`` holds the rendered script, the
resolved spec, a copy of the experiment, ``cluster.json``, ``events.jsonl`` and ``logs/``.
On each node: a short node-local temp dir ``/tmp/srl-<jobid>`` for Ray (Unix socket paths must
stay under 107 bytes, and Ray nests several directories below its temp dir).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

NODE_TMP_ROOT = "/tmp"


def node_temp_dir(job_id: int | str) -> str:
    """Node-local Ray temp dir of a job; short so Ray's socket paths fit in 107 bytes."""
    return f"{NODE_TMP_ROOT}/srl-{job_id}"


@dataclass(frozen=True)
class JobPaths:
    """The job directory of one job (or of a local run) and everything inside it."""

    job_dir: Path

    @classmethod
    def for_job(cls, fileroot: str, user: str, name: str, job_id: int | str) -> JobPaths:
        return cls(Path(fileroot) / user / name / str(job_id))

    @property
    def name_dir(self) -> Path:
        return self.job_dir.parent

    @property
    def sbatch_script(self) -> Path:
        return self.job_dir / "sbatch.sh"

    @property
    def spec(self) -> Path:
        return self.job_dir / "spec.json"

    @property
    def options(self) -> Path:
        return self.job_dir / "options.json"

    @property
    def ray_auth_token(self) -> Path:
        return self.job_dir / "ray_auth_token"

    @property
    def experiment(self) -> Path:
        return self.job_dir / "experiment.py"

    @property
    def cluster(self) -> Path:
        return self.job_dir / "cluster.json"

    @property
    def events(self) -> Path:
        return self.job_dir / "events.jsonl"

    @property
    def exit_code(self) -> Path:
        return self.job_dir / "exit_code"

    @property
    def exit_reason(self) -> Path:
        return self.job_dir / "exit_reason"

    @property
    def markers(self) -> Path:
        """Per-attempt marker files the nodes of a job use to talk to each other."""
        return self.job_dir / "nodes"

    def node_marker(self, attempt: int, rank: int, kind: str) -> Path:
        """``<attempt>-<rank>.up`` / ``.failed``: a node joined, or failed, in this attempt."""
        return self.markers / f"{attempt}-{rank}.{kind}"

    def stop_flag_for(self, attempt: int) -> Path:
        """Created by node 0 when the driver has ended: every other node stops its Ray."""
        return self.markers / f"{attempt}-stop"

    @property
    def logs(self) -> Path:
        return self.job_dir / "logs"

    @property
    def batch_log(self) -> Path:
        return self.logs / "batch.log"

    @property
    def driver_log(self) -> Path:
        return self.logs / "driver.log"

    def node_log(self, node: str) -> Path:
        return self.logs / f"node-{node}.log"

    def ray_logs(self, node: str) -> Path:
        return self.logs / "ray" / node


def current_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return str(os.getuid())
