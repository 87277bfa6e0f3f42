"""Every path of a job, in one place: the job dir on the shared filesystem and the node-local
temp dir. No other module spells a file name of the job dir (the template gets the few it needs
from here, through render).

On the shared filesystem: ``<fileroot>/<user>/<name>/<jobid>/``. On each node: a short
node-local temp dir ``/tmp/srl-<jobid>`` for Ray (Unix socket paths must stay under 107 bytes,
and Ray nests several directories below its temp dir).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

NODE_TMP_ROOT = "/tmp"  # the spec's node_local_dir by default
NODE_TEMP_PREFIX = "srl-"  # a job's node-local temp dir is <root>/srl-<job id>
MARKERS_DIR = "nodes"
SECRETS_FILE = "secrets.env"


RAY_SUBDIR = "r"  # Ray's temp dir, inside the job's node-local dir


def ray_temp_dir(temp_dir: str) -> str:
    """Ray's ``--temp-dir`` inside the job's node-local dir. Ray makes its temp dir (and each
    session, log and socket dir below it) mode 0777 so that users may share one /tmp/ray; one
    level down, the job's own dir (mode 0700, this user's) keeps every other user out of all of
    it: the sockets (object store, raylet, fork server), the logs, the session files."""
    return f"{temp_dir}/{RAY_SUBDIR}"


def node_dir_of_session(session_dir: str) -> Path:
    """The job's node-local dir a Ray session dir (``<node dir>/r/session_*``) is in."""
    return Path(session_dir).parent.parent


def node_temp_dir(job_id: int | str, root: str = NODE_TMP_ROOT) -> str:
    """Node-local Ray temp dir of a job under ``root`` (the spec's node_local_dir); short so
    Ray's socket paths fit in 107 bytes."""
    return f"{root}/{NODE_TEMP_PREFIX}{job_id}"


def image_cache_dir(root: str = NODE_TMP_ROOT) -> str:
    """Node-local bookkeeping of the per-node image cache (runtimes/pyxis_image_cache.sh) under ``root``
    (the spec's node_local_dir): its lock, and per image its size and last use."""
    return f"{root}/slurm-rl-images"


def warned_marker_name(attempt: int | str) -> str:
    """File name (in the markers dir) noting that SLURM's warning signal came in ``attempt``.
    ``attempt`` may be a shell expression: the batch script creates it."""
    return f"warned-{attempt}"


@dataclass(frozen=True)
class JobPaths:
    """The job directory of one job (or of a local run) and everything inside it."""

    job_dir: Path

    @classmethod
    def for_job(cls, fileroot: str, user: str, name: str, job_id: int | str) -> JobPaths:
        return cls(Path(fileroot) / user / name / str(job_id))

    @property
    def job_id(self) -> str:
        return self.job_dir.name

    @property
    def name_dir(self) -> Path:
        return self.job_dir.parent

    # ---- staged by submit ------------------------------------------------------------------
    @property
    def sbatch_script(self) -> Path:
        return self.job_dir / "sbatch.sh"

    @property
    def spec(self) -> Path:
        """The resolved cluster spec, as a record (the node side reads the manifest)."""
        return self.job_dir / "spec.json"

    @property
    def manifest(self) -> Path:
        """The job manifest: the one contract between the login node and the job."""
        return self.job_dir / "manifest.json"

    @property
    def ray_auth_token(self) -> Path:
        return self.job_dir / "ray_auth_token"

    @property
    def secrets(self) -> Path:
        """The spec's secret-looking env values, shell syntax, mode 0600 (sourced by sbatch.sh)."""
        return self.job_dir / SECRETS_FILE

    @property
    def experiment(self) -> Path:
        return self.job_dir / "experiment.py"

    @property
    def call_pickle(self) -> Path:
        """A function submitted with ``slurm_rl.submit(spec, fn, ...)`` (cloudpickled)."""
        return self.job_dir / "call.pkl"

    @property
    def call_result(self) -> Path:
        """What that function returned or raised (cloudpickled)."""
        return self.job_dir / "call_result.pkl"

    # ---- written while the job runs --------------------------------------------------------
    @property
    def cluster(self) -> Path:
        return self.job_dir / "cluster.json"

    @property
    def events(self) -> Path:
        return self.job_dir / "events.jsonl"

    @property
    def end_time(self) -> Path:
        """SLURM's end time of the running attempt, kept fresh by node 0 (job/end_time_watch.py)."""
        return self.job_dir / "end_time.json"

    @property
    def exit_code(self) -> Path:
        return self.job_dir / "exit_code"

    @property
    def exit_reason(self) -> Path:
        return self.job_dir / "exit_reason"

    @property
    def bad_nodes(self) -> Path:
        """Nodes an attempt's cause named (one per line): a retry excludes them (templates/finalize.sh.j2)."""
        return self.job_dir / "bad_nodes"

    @property
    def start_go(self) -> Path:
        """--cluster first's go: the submitter chose this job; its batch script may start."""
        return self.job_dir / "start_go"

    @property
    def exit_cause(self) -> Path:
        """The cause the node that saw the end recorded (core/causes.py's line)."""
        return self.job_dir / "exit_cause"

    @property
    def markers(self) -> Path:
        """Per-attempt marker files the nodes of a job use to talk to each other."""
        return self.job_dir / MARKERS_DIR

    def node_marker(self, attempt: int, rank: int, kind: str) -> Path:
        """``<attempt>-<rank>.up`` / ``.failed``: a node joined, or failed, in this attempt."""
        return self.markers / f"{attempt}-{rank}.{kind}"

    def node_markers(self, attempt: int, kind: str) -> list[Path]:
        """Every node marker of ``kind`` in this attempt."""
        return sorted(self.markers.glob(f"{attempt}-*.{kind}"))

    def preflight_leave(self, attempt: int) -> Path:
        """Written by node 0 under --heal once preflight's verdict is in: the nodes it found bad
        that leave the job for replacements (one per line; empty: none)."""
        return self.markers / f"{attempt}-preflight-leave"

    def stop_flag_for(self, attempt: int) -> Path:
        """Created by node 0 when the driver has ended: every other node stops its Ray."""
        return self.markers / f"{attempt}-stop"

    def requeue_request(self, attempt: int | str) -> Path:
        """Written by ``slurm_rl.requeue()``: the driver asks for another attempt."""
        return self.markers / f"requeue-{attempt}"

    @property
    def chain_jobs(self) -> Path:
        """A chain's (``--chain``) job ids, one per line, in the run dir (its first job's dir)."""
        return self.job_dir / "chain_jobs"

    @property
    def chain_finished(self) -> Path:
        """In a chain's run dir: the id of the job whose driver finished the run (exit 0)."""
        return self.job_dir / "chain_finished"

    @property
    def rollouts(self) -> Path:
        """Rollout records of ``slurm_rl.rollouts.RolloutPool`` (one JSON object a line)."""
        return self.job_dir / "rollouts.jsonl"

    @property
    def gym_env(self) -> Path:
        """NeMo Gym's env.yaml for this job: ``ray_head_node_address`` (written by node 0)."""
        return self.job_dir / "gym_env.yaml"

    @property
    def output(self) -> Path:
        """Files the driver writes for its user (slurm_rl.output_dir()): `fetch` takes them home."""
        return self.job_dir / "output"

    @property
    def metrics(self) -> Path:
        """``slurm_rl.MetricsLog``: one JSON line per logged step."""
        return self.job_dir / "metrics.jsonl"

    def plot(self, name: str) -> Path:
        return self.job_dir / f"{name}.png"

    def warned_marker(self, attempt: int | str) -> Path:
        return self.markers / warned_marker_name(attempt)

    @property
    def cleanup_script(self) -> Path:
        """job/cleanup_node.sh, for the batch script: the nodes of a step that srun killed (SIGKILL,
        no bootstrap cleanup) are cleaned from there (templates/finalize.sh.j2)."""
        return self.job_dir / "cleanup_node.sh"

    @property
    def image_cache_script(self) -> Path:
        """The per-node image cache's script (runtimes/pyxis_image_cache.sh), for the batch script's steps."""
        return self.job_dir / "container" / "image_cache.sh"

    @property
    def enroot_config(self) -> Path:
        """ENROOT_CONFIG_PATH of a cached-image container step: the user's enroot config and
        slurm-rl's overlay hook (runtimes/pyxis_overlay_hook.sh)."""
        return self.job_dir / "container" / "enroot"

    @property
    def member_script(self) -> Path:
        """The batch script of a member job (--heal: a replacement node), rendered at submit."""
        return self.job_dir / "member.sh"

    @property
    def members(self) -> Path:
        """Member jobs: ``N.request`` (the head asks), ``N.job`` (its SLURM id) or ``N.error``."""
        return self.job_dir / "members"

    def member_log(self, member: int | str) -> Path:
        """Member job ``member``'s batch log (``member`` "" gives the prefix)."""
        return self.logs / f"member-{member}{'.log' if member != '' else ''}"

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

    @property
    def services(self) -> Path:
        """A job of parts' service instances: ``<part>/<node>-<i>.json`` each (job/service_instances.py)."""
        return self.job_dir / "services"

    def service_state(self, part: str, node: str, instance: int) -> Path:
        return self.services / part / f"{node}-{instance}.json"

    @property
    def service_supervisor(self) -> Path:
        """The supervisor of a part with an image of its own (job/service_supervise.sh), staged
        at submit: the batch script starts it in that image, where no slurm-rl is."""
        return self.services / "supervise.sh"

    @property
    def services_stop(self) -> Path:
        """Made at the job's end: every supervisor ends its instances and exits."""
        return self.services / "stop"

    def service_home(self, part: str, node: str, instance: int) -> Path:
        """An isolated instance's own directory, its HOME: the one place of the job it sees."""
        return self.services / part / f"{node}-{instance}.d"

    def service_log(self, part: str, node: str, instance: int) -> Path:
        """What a service instance prints (`slurm-rl logs JOB --service PART --instance I`)."""
        return self.logs / "services" / part / f"{node}-{instance}.log"


def current_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        return str(os.getuid())
