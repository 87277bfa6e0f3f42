"""Sweeps: the same experiment over a grid of arguments, one SLURM job array, each task a
multi-node slurm-rl job of its own (its Ray cluster, job dir, token, ports and logs).

The grid: the experiment's arguments with comma lists (``--lr 1e-4,3e-4 --seed 0,1``: their
product, the last varying fastest), and/or a ``--grid FILE`` of one JSON object per line (each
a point: ``{"lr": 1e-4, "seed": 0}`` -> ``--lr 0.0001 --seed 0``). Task ``i`` of array ``A``
is the job ``A_i`` (SLURM's own notation) with the job dir ``<fileroot>/<user>/<name>/A_i``;
the sweep's record (``sweep.json``: every task's arguments) and, with ``--snapshot``, the one
copy of the code its tasks run are in ``<fileroot>/<user>/<name>/sweep-A``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config.spec import ClusterSpec
from ..core.errors import SlurmCommandError, UsageError
from ..core.events import append_event, write_atomic
from ..core.job_ids import array_task_id
from ..core.paths import JobPaths
from ..slurm import SlurmClient
from .reading import index
from .submission.plan import JobPlan, resolve_plan
from .submission.preflight import preflight
from .submission.render import RenderedJob, render_job
from .submission.resolve import JobOptions, changed
from .submission.snapshot import SNAPSHOT_DIR, copy_snapshot
from .submission.submit import make_name_dir, sbatch_refusal, stage_job_dir

SWEEP_RECORD = "sweep.json"


@dataclass(frozen=True)
class Point:
    """One task's arguments (argv for the experiment) and its point of the grid (name -> value)."""

    args: tuple[str, ...]
    values: dict[str, str]


def point_text_args(point: Point) -> str:
    """A task's arguments as you would type them."""
    import shlex

    return shlex.join(point.args) or "(no arguments)"


def _name_of(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_") or flag


def expand_args(args: tuple[str, ...]) -> list[Point]:
    """The product of the comma lists in ``args``. A list is an item with a comma: a value
    (named by the flag before it), or the value of a ``--flag=a,b`` item."""
    choices: list[list[tuple[str, str | None, str]]] = []  # per item: (argv item, name, value)
    for i, item in enumerate(args):
        flag, eq, value = item.partition("=")
        if eq and flag.startswith("-") and "," in value:
            name, prefix, values = _name_of(flag), f"{flag}=", value.split(",")
        elif "," in item and not item.startswith("-"):
            before = args[i - 1] if i > 0 else ""
            name = _name_of(before) if before.startswith("-") and "=" not in before else f"arg{i}"
            prefix, values = "", item.split(",")
        else:
            choices.append([(item, None, "")])
            continue
        if any(v == "" for v in values):
            raise UsageError(
                f"sweep argument {item!r}: an empty value in the comma list; list values like 1e-4,3e-4 "
                f"(or use --grid FILE for values with commas)"
            )
        choices.append([(prefix + v, name, v) for v in values])
    points = []
    for combo in itertools.product(*choices):
        point = {name: value for _, name, value in combo if name is not None}
        points.append(Point(tuple(a for a, _, _ in combo), point))
    return points


def read_grid(path: str) -> list[Point]:
    """``--grid FILE``: one JSON object per line, each a point; a value ``true`` is a bare
    ``--flag``, ``false``/``null`` leaves the flag out."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise UsageError(f"--grid {path}: cannot read it ({exc.strerror}); give a file of JSON lines") from None
    points = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--grid {path}: line {n} is not JSON ({exc.msg}); one object per line") from None
        if not isinstance(obj, dict) or not obj:
            raise UsageError(f'--grid {path}: line {n} is not a JSON object; write e.g. {{"lr": 1e-4, "seed": 0}}')
        args: list[str] = []
        values: dict[str, str] = {}
        for key, value in obj.items():
            if isinstance(value, (dict, list)):
                raise UsageError(
                    f"--grid {path}: line {n}: {key!r} is a {type(value).__name__}; give a number or a string"
                )
            flag = key if key.startswith("-") else f"--{key}"
            if value is True:
                args.append(flag)
            elif value not in (False, None):
                args += [flag, str(value)]
            values[_name_of(key)] = json.dumps(value) if not isinstance(value, str) else value
        points.append(Point(tuple(args), values))
    if not points:
        raise UsageError(f"--grid {path}: no points in it (one JSON object per line)")
    return points


def sweep_points(args: tuple[str, ...], grid: str | None) -> list[Point]:
    """The tasks of a sweep: the comma lists of ``args`` times the lines of ``grid``."""
    base = expand_args(args)
    if grid is None:
        return base
    return [Point(b.args + g.args, {**b.values, **g.values}) for b in base for g in read_grid(grid)]


def array_spec(count: int, max_concurrent: int | None) -> str:
    if max_concurrent is not None and max_concurrent < 1:
        raise UsageError(f"--max-concurrent {max_concurrent}: must be at least 1 (tasks running at once)")
    return f"0-{count - 1}" + (f"%{max_concurrent}" if max_concurrent else "")


@dataclass(frozen=True)
class Sweep:
    """A submitted sweep: its array id, its record's dir and one job dir per task."""

    array_id: int
    sweep_dir: Path
    record: dict[str, object]

    @property
    def tasks(self) -> list[dict[str, object]]:
        return list(self.record.get("tasks", []))  # type: ignore[call-overload]

    @property
    def task_ids(self) -> list[str]:
        return [str(t["job_id"]) for t in self.tasks]

    def task_paths(self) -> list[JobPaths]:
        return [JobPaths(Path(str(t["job_dir"]))) for t in self.tasks]


def sweep_dir_for(name_dir: Path, array_id: int) -> Path:
    return name_dir / f"sweep-{array_id}"


def task_options(opts: JobOptions, point: Point) -> JobOptions:
    return changed(opts, experiment_args=point.args)


def render_tasks(plan: JobPlan, task_opts: list[JobOptions], points: list[Point]) -> list[RenderedJob]:
    """Every task's script (the same for all: their arguments are in their manifests) and manifest."""
    jobs = []
    for opts, point in zip(task_opts, points):
        job = render_job(dataclasses.replace(plan, opts=opts))
        jobs.append(RenderedJob(job.script, job.manifest.model_copy(update={"sweep_point": point.values})))
    return jobs


def submit_sweep(
    spec: ClusterSpec,
    opts: JobOptions,
    points: list[Point],
    client: SlurmClient,
    max_concurrent: int | None = None,
    release: bool = True,
    stage_task: Callable[[int, JobPaths], None] | None = None,
) -> Sweep:
    """Submit one job array of ``len(points)`` tasks, held until every task's job dir exists
    under its final name (``A_i``), then released. ``stage_task(i, paths)`` may add files to
    task ``i``'s job dir before it can start (``map_array``'s pickled calls)."""
    if spec.cluster_type != "slurm":
        raise UsageError(
            f"spec {spec.cluster_name!r} has cluster_type {spec.cluster_type!r}: a sweep needs a SLURM spec"
        )
    if not points:
        raise UsageError("sweep: no tasks (the grid is empty)")
    opts = changed(opts, array=array_spec(len(points), max_concurrent))
    plan = resolve_plan(spec, opts, client)
    preflight(plan, client)
    spec = plan.spec
    task_opts = [task_options(opts, point) for point in points]
    jobs = render_tasks(plan, task_opts, points)
    name_dir = make_name_dir(spec, opts)
    stage_root = name_dir / f".stage-{uuid.uuid4().hex[:12]}"
    stages = [JobPaths(stage_root / str(i)) for i in range(len(points))]
    try:
        stage_root.mkdir(mode=0o700)
        for i, (stage, job) in enumerate(zip(stages, jobs)):
            stage_job_dir(stage, spec, task_opts[i], job, snapshot=False)
            if stage_task is not None:
                stage_task(i, stage)
        if jobs[0].manifest.snapshot_root:  # one copy of the code for every task
            copy_snapshot(Path(jobs[0].manifest.snapshot_root), stage_root / SNAPSHOT_DIR)
        array_id = client.sbatch(str(stages[0].sbatch_script), hold=True)
    except SlurmCommandError as exc:
        shutil.rmtree(stage_root, ignore_errors=True)
        raise sbatch_refusal(exc) from None
    except BaseException:
        shutil.rmtree(stage_root, ignore_errors=True)
        raise
    sweep_dir = sweep_dir_for(name_dir, array_id)
    tasks = []
    for i, stage in enumerate(stages):
        paths = JobPaths(name_dir / array_task_id(array_id, i))
        os.rename(stage.job_dir, paths.job_dir)
        tasks.append(
            {
                "task": i,
                "job_id": paths.job_id,
                "job_dir": str(paths.job_dir),
                "args": list(points[i].args),
                "point": points[i].values,
            }
        )
    os.rename(stage_root, sweep_dir)
    if jobs[0].manifest.snapshot_root:
        for t in tasks:
            os.symlink(
                os.path.relpath(sweep_dir / SNAPSHOT_DIR, str(t["job_dir"])), Path(str(t["job_dir"])) / SNAPSHOT_DIR
            )
    record = {
        "array_id": array_id,
        "name": opts.name,
        "experiment": opts.experiment,
        "nodes": opts.total_nodes,
        "array": opts.array,
        "cluster": spec.cluster_name,
        "tasks": tasks,
    }
    write_atomic(sweep_dir / SWEEP_RECORD, json.dumps(record, indent=2) + "\n")
    for t in tasks:
        paths = JobPaths(Path(str(t["job_dir"])))
        append_event(paths.events, "submitted", job_id=t["job_id"], nodes=opts.total_nodes, sweep=array_id)
        index.record(str(t["job_id"]), paths, spec.cluster_name)
    if release:
        client.release(array_id)
    return Sweep(array_id, sweep_dir, record)


def load_sweep(sweep_dir: Path) -> Sweep | None:
    try:
        record = json.loads((sweep_dir / SWEEP_RECORD).read_text())
    except (OSError, ValueError):
        return None
    return Sweep(int(record["array_id"]), sweep_dir, record)


def find_sweep(array_id: int, user: str, spec: ClusterSpec | None = None) -> Sweep | None:
    """A sweep by its array id: from the index (its tasks' job dirs), else under the spec's fileroot."""
    for e in index.with_prefix(f"{array_id}_"):
        found = load_sweep(sweep_dir_for(Path(str(e["job_dir"])).parent, array_id))
        if found is not None:
            return found
    if spec is not None:
        for candidate in sorted((Path(spec.fileroot) / user).glob(f"*/sweep-{array_id}")):
            found = load_sweep(candidate)
            if found is not None:
                return found
    return None
