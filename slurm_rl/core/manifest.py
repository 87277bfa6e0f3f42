"""The job manifest: the one contract between the login node and the job.

``render`` builds it from the spec and the resolved options; ``submit`` writes it into the job
dir as ``manifest.json``; the node bootstrap, finalize, cleanup, ``status`` and ``teardown``
read only this (never the raw spec, never ``SLURM_RL_*`` variables with fallbacks). The batch
script keeps only what has to be shell: the spec's setup lines (which may provide the python)
and the job dir.

The format is versioned: a job dir written by an incompatible slurm-rl is refused with a clear
error instead of being half understood.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import JobError
from .events import write_atomic
from .fields import first_match
from .options import JobOptions
from .paths import node_temp_dir

MANIFEST_FORMAT = 2  # 2: the manifest is JobOptions + additions (nodes: workers; total_nodes)
JOB_ID_PLACEHOLDER = "\0JOBID\0"  # stands for the job id where it is not known yet (render)


class Container(BaseModel):
    """How every process of the job is started: the runtime's name (slurm_rl/runtimes: each
    runtime turns this into its node step's flags), the image and its mounts."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    runtime: str = "none"
    image: str | None = None
    mounts: tuple[str, ...] = ()
    workdir: str = ""  # "": the job dir (on the fileroot, which is always mounted)
    gpus: bool = False
    cache_mb: int = 0  # the runtime's per-node image cache's budget (0: no cache)
    scratch: str = "/tmp"  # the spec's node_local_dir: the job's node-local dir is <scratch>/srl-<id>

    def temp_dir(self, job_id: int | str) -> str:
        """The job's node-local dir (where an image extracted per job goes too)."""
        return node_temp_dir(job_id, self.scratch)

    @property
    def cached(self) -> bool:
        """Started from the node's prepared copy of the image under a per-container layer,
        instead of an unpack per job."""
        return self.cache_mb > 0


class JobManifest(JobOptions):
    """The job's options (``core/options.py``: same names, same checks) plus what render and
    submit add. Frozen; the node side reads only this."""

    format: int = MANIFEST_FORMAT
    slurm_rl_version: str
    cluster_name: str
    experiment_src_dir: str = ""  # imports next to the original experiment keep working
    node_type_from_node_name: dict[str, str] = Field(
        default_factory=dict
    )  # regex -> type: Ray resource node_type:<type>
    gpu_type_from_node_name: dict[str, str] = Field(
        default_factory=dict
    )  # regex -> type: Ray resource gpu_type:<type> (per GPU)
    setup: tuple[str, ...] = ()
    setup_first_line: int = 0  # line of setup[0] in the node script (blames a failing line)
    container: Container = Container()
    node_local_dir: str = "/tmp"  # the spec's: the job's Ray temp dir is <node_local_dir>/srl-<id>
    network_interface: str = ""  # the spec's: the interface or network Ray uses ("": the node's name)
    snapshot_root: str = ""  # --snapshot: the repository copied into <job dir>/code at submit
    sweep_point: dict[str, str] = Field(default_factory=dict)  # a sweep's task: its point (name -> value)

    def in_snapshot(self, path: str, job_dir: Path) -> str:
        """``path`` inside the job's snapshot when it lies in the snapshotted repository."""
        if not self.snapshot_root or not path:
            return path
        try:
            rel = Path(path).relative_to(self.snapshot_root)
        except ValueError:
            return path
        return str(job_dir / "code" / rel)

    @property
    def own_image_parts(self) -> list[str]:
        """The service parts and sidecars whose instances run in an image other than the job's."""
        return [name for name, part in self.parts.items() if part.has_own_image(self.container.image)]

    @property
    def has_services(self) -> bool:
        return any(part.is_service for part in self.parts.values())

    def service_code_dir(self, job_dir: Path) -> str:
        """Where a job of parts' services run: the job's copy of the experiment's directory
        (``<job dir>/code``, made at submit), or with ``--snapshot`` that directory's place in
        the repository's copy."""
        if self.snapshot_root:
            return self.in_snapshot(self.experiment_src_dir, job_dir)
        return str(job_dir / "code")

    def temp_dir(self, job_id: int | str) -> str:
        """The job's node-local dir on every node: Ray's temp dir, uv environments."""
        return node_temp_dir(job_id, self.node_local_dir)

    @field_validator("parts", mode="before")
    @classmethod
    def _parts_in_order(cls, value: Any) -> Any:
        """The file's order of the parts (the first Ray part holds the head): kept as pairs."""
        return dict(value) if isinstance(value, list) else value

    def to_json(self) -> str:
        data = self.model_dump(mode="json")
        data["parts"] = [[name, part] for name, part in data["parts"].items()]  # sort_keys keeps lists
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    def write(self, path: Path) -> None:
        write_atomic(path, self.to_json())

    def type_resources(self, node: str, gpus: int) -> dict[str, float]:
        """The spec's node and GPU types of ``node`` as Ray custom resources (drivers target
        them, e.g. ``resources={"gpu_type:a100": 1}``); first matching regex wins."""
        out: dict[str, float] = {}
        node_type = first_match(self.node_type_from_node_name, node)
        gpu_type = first_match(self.gpu_type_from_node_name, node)
        if node_type:
            out[f"node_type:{node_type}"] = 1
        if gpu_type and gpus > 0:
            out[f"gpu_type:{gpu_type}"] = gpus
        return out

    def setup_line(self, script_line: int) -> tuple[int, str]:
        """(index, text) of the setup line at ``script_line`` of the node script."""
        index = script_line - self.setup_first_line
        return index, (repr(self.setup[index]) if 0 <= index < len(self.setup) else "?")


def load_manifest(path: Path) -> JobManifest:
    """Read a job's manifest; JobError (naming the file and the fix) if absent or foreign."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise JobError(
            f"{path} does not exist: this job dir was not written by slurm-rl "
            f"(or by a version before manifests); resubmit the job"
        ) from None
    except json.JSONDecodeError as exc:
        raise JobError(f"{path} is not valid JSON ({exc}); resubmit the job") from None
    found = data.get("format") if isinstance(data, dict) else None
    if found != MANIFEST_FORMAT:
        raise JobError(
            f"{path} has manifest format {found!r}, this slurm-rl reads format {MANIFEST_FORMAT}; "
            f"use the slurm-rl version that submitted the job ({data.get('slurm_rl_version', '?')})"
        )
    try:
        return JobManifest.model_validate(data)
    except ValidationError as exc:
        raise JobError(f"{path}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}; resubmit the job") from None
