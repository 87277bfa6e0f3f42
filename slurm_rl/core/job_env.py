"""The job's environment and slurm-rl's settings, read in one place (as submitit's ``JobEnvironment``).

Everything the product takes from environment variables set by SLURM, by slurm-rl or by its
user is a typed field here (``JobEnvironment``: the job's; ``Settings``: the knobs); nothing else
reads a ``SLURM_*`` or ``SLURM_RL_*`` variable (tests/unit/test_rules.py holds it).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .nodelist import expand_hostlist

JOB_DIR_ENV = "SLURM_RL_JOB_DIR"  # set by the batch script, local runs and the driver's env
EXTERNAL_RAY_ENV = "SLURM_RL_EXTERNAL_RAY"  # a run on a Ray cluster slurm-rl did not start
TEMP_DIR_ENV = "SLURM_RL_TEMP_DIR"
# Ray's own variables, as slurm-rl sets them for a job's processes (defined once, here)
RAY_ADDRESS_ENV = "RAY_ADDRESS"
RAY_AUTH_MODE_ENV = "RAY_AUTH_MODE"
RAY_AUTH_TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
# Ray's system config for the clusters slurm-rl starts. A raylet prestarts a Python worker per CPU
# for the first driver, with no runtime_env; init_ray gives every job one (its env_vars and the
# setup hook), so none of those workers could serve the job: measured, 2 actors started 4
# workers, 2 left idle for the job's life.
RAY_SYSTEM_CONFIG = {"prestart_worker_first_driver": False}
RUN_DIR_ENV = "SLURM_RL_RUN_DIR"  # the driver's: a chain's shared run dir (--chain), else the job dir
MEMBER_ENV = "SLURM_RL_MEMBER"  # set by the batch script for a member job (--heal): its number, 1, 2, ...
MEMBER_ATTEMPT_ENV = "SLURM_RL_ATTEMPT"  # ... and the attempt of the job it joins
MEMBER_RANK_BASE = 1000  # member N's nodes are ranks N*1000 + 0, 1, ... in the job it joins
# slurm-rl's settings, as a user, a site or a test sets them (Settings below reads them)
INDEX_ENV = "SLURM_RL_INDEX"  # the job index file, instead of $XDG_STATE_HOME/slurm-rl/index.jsonl
LOGIN_ENV = "SLURM_RL_LOGIN"  # a laptop's login node, as --login gives it
CLUSTERS_ENV = "SLURM_RL_CLUSTERS"  # the clusters file, instead of $XDG_CONFIG_HOME/slurm_rl/clusters.json
SSH_CONFIG_ENV = "SLURM_RL_SSH_CONFIG"  # an ssh config file instead of ~/.ssh/config (ssh -F)
CONTROL_DIR_ENV = "SLURM_RL_SSH_DIR"  # where the ControlMaster sockets live (default ~/.cache/slurm-rl/ssh)
BACKEND_ENV = "SLURM_RL_COMM_BACKEND"  # a worker group's collective backend: nccl or gloo
COMPRESSION_ENV = "SLURM_RL_GRADIENT_COMPRESSION"  # "fp16": all-reduce gradients in half precision
LAZY_ENV = "SLURM_RL_LAZY_PLACEMENT"  # "1": every RayVirtualCluster places its groups on first use
FORK_ENV = "SLURM_RL_RAY_FORK"  # "0": Ray's workers start as fresh interpreters, not forks
SETUP_WORKER_ENV = "SLURM_RL_RAY_SETUP_WORKER"  # "ray": Ray's own setup_worker.py, not the light one
FORK_RETIRE_ENV = "SLURM_RL_FORK_RETIRE_S"  # read by the fork server's zygote, a script (fork_child.py)
MAX_RETRIES_ENV_TWIN = "SLURM_RL_VIRTUAL_CLUSTER_MAX_RETRIES"  # NeMo RL's NRL_VIRTUAL_CLUSTER_MAX_RETRIES
STACKS_DIR_ENV = "SLURM_RL_STACKS_DIR"  # node-local: where armed processes keep their dump files
VENV_DIR_ENV = "SLURM_RL_VENV_DIR"  # create_local_venv's root, after NeMo RL's NEMO_RL_VENV_DIR


def _int(raw: str | None, default: int = 0) -> int:
    try:
        return int(raw) if raw not in (None, "") else default
    except ValueError:
        return default


@dataclass(frozen=True)
class JobEnvironment:
    """What this process knows about the job it is part of (all optional outside a job)."""

    job_id: str | None  # SLURM_JOB_ID (a hetjob component's own id)
    array_task: str | None  # "<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>": a sweep's task, slurm-rl's id of it
    attempt: int  # SLURM_RESTART_COUNT: 0 for the first run, +1 per requeue (a member: its job's)
    member: int  # SLURM_RL_MEMBER: 0 in the job itself, N in its member job N (--heal)
    job_dir: Path | None  # SLURM_RL_JOB_DIR: the slurm-rl job dir
    node: str  # SLURMD_NODENAME, else the host name
    node_rank: int  # SLURM_NODEID
    nodelist: str | None  # SLURM_JOB_NODELIST (compressed hostlist)
    cpus_on_node: int  # SLURM_CPUS_ON_NODE
    gpus_on_node: int  # SLURM_GPUS_ON_NODE
    external_ray: str | None  # HOST:PORT of a Ray cluster slurm-rl did not start (cluster_type "ray")
    temp_dir: str | None  # SLURM_RL_TEMP_DIR: the job's node-local dir (the bootstrap exports it)
    topology_addr: str  # SLURM_TOPOLOGY_ADDR: switches from the top down to this node (topology/tree)
    topology_pattern: str  # SLURM_TOPOLOGY_ADDR_PATTERN: what each part of it is ("switch.switch.node")
    task_rank: int  # SLURM_PROCID: the task's rank in its step (across a heterogeneous step's components)
    job_name: str  # SLURM_JOB_NAME
    environ: Mapping[str, str]  # the variables read, for what only a few callers need

    @classmethod
    def current(cls, environ: Mapping[str, str] | None = None) -> JobEnvironment:
        env = os.environ if environ is None else environ
        job_dir = env.get(JOB_DIR_ENV)
        return cls(
            job_id=env.get("SLURM_JOB_ID") or None,
            array_task=(
                f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
                if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID")
                else None
            ),
            attempt=_int(env.get(MEMBER_ATTEMPT_ENV) if env.get(MEMBER_ENV) else env.get("SLURM_RESTART_COUNT")),
            member=_int(env.get(MEMBER_ENV)),
            job_dir=Path(job_dir) if job_dir else None,
            node=env.get("SLURMD_NODENAME") or socket.gethostname(),
            node_rank=_int(env.get("SLURM_NODEID")),
            nodelist=env.get("SLURM_JOB_NODELIST") or None,
            cpus_on_node=_int(env.get("SLURM_CPUS_ON_NODE"), 1),
            gpus_on_node=_int(env.get("SLURM_GPUS_ON_NODE")),
            external_ray=env.get(EXTERNAL_RAY_ENV) or None,
            temp_dir=env.get(TEMP_DIR_ENV) or None,
            topology_addr=env.get("SLURM_TOPOLOGY_ADDR", ""),
            topology_pattern=env.get("SLURM_TOPOLOGY_ADDR_PATTERN", ""),
            task_rank=_int(env.get("SLURM_PROCID")),
            job_name=env.get("SLURM_JOB_NAME", ""),
            environ=dict(env),
        )

    @property
    def in_slurm_job(self) -> bool:
        return self.job_id is not None

    @property
    def in_slurm_rl_job(self) -> bool:
        """A slurm-rl job dir and a SLURM job: the driver or a node of a submitted job."""
        return self.job_dir is not None and self.job_id is not None

    @property
    def in_local_run(self) -> bool:
        """A driver under `slurm-rl run` on its embedded local Ray (a job dir, no SLURM job, no
        --ray-address)."""
        return self.job_dir is not None and self.job_id is None and self.external_ray is None

    @property
    def run_dir(self) -> Path | None:
        """Where a run keeps what outlives one job (checkpoints): a chain's shared dir, else the job dir."""
        raw = self.environ.get(RUN_DIR_ENV)
        return Path(raw) if raw else self.job_dir

    def leaf_switch(self) -> str | None:
        """The switch this node hangs from in SLURM's topology (the last switch of its address),
        or its block under ``topology/block`` (23.11+: ``b1.node1``, pattern ``block.node``)."""
        switches = [
            part
            for part, kind in zip(self.topology_addr.split("."), self.topology_pattern.split("."))
            if kind in ("switch", "block") and part
        ]
        return switches[-1] if switches else None

    def require_job_dir(self) -> Path:
        if self.job_dir is None:
            raise RuntimeError(f"{JOB_DIR_ENV} is not set: this runs only inside a slurm-rl job")
        return self.job_dir

    def nodes_and_rank(self) -> tuple[list[str], int]:
        """All nodes of the job in SLURM's order (head first) and this node's place."""
        groups = self.component_nodes()
        if groups:
            nodes = [n for group in groups for n in group]
            return nodes, nodes.index(self.node) if self.node in nodes else self.node_rank
        return expand_hostlist(self.nodelist or self.node), self.node_rank

    def component_nodes(self) -> list[list[str]]:
        """The nodes of each component of a heterogeneous job, in SLURM's order (its step sees
        them in SLURM_JOB_NODELIST_HET_GROUP_<k>); [] in a plain job."""
        groups = sorted(
            (int(k.rsplit("_", 1)[1]), v)
            for k, v in self.environ.items()
            if k.startswith("SLURM_JOB_NODELIST_HET_GROUP_") and k.rsplit("_", 1)[1].isdigit()
        )
        return [expand_hostlist(hostlist) for _, hostlist in groups]

    def visible_gpus(self) -> list[str] | None:
        """The devices SLURM gave this node's task (the first visible-device list set), or None."""
        for var in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
            listed = self.environ.get(var, "")
            if listed and listed != "NoDevFiles":
                return [d.strip() for d in listed.split(",") if d.strip()]
        return None

    def memory_share_mib(self) -> tuple[int, str] | None:
        """This node's share of the job's memory as SLURM's environment says it, in MiB, with
        where it came from; None where it gives no number (``--mem=0``: all of the node's)."""
        per_node = self.environ.get("SLURM_MEM_PER_NODE", "")
        if per_node.isdigit() and int(per_node) > 0:
            return int(per_node), f"SLURM_MEM_PER_NODE={per_node}"
        per_cpu, cpus = self.environ.get("SLURM_MEM_PER_CPU", ""), self.environ.get("SLURM_CPUS_ON_NODE", "")
        if per_cpu.isdigit() and int(per_cpu) > 0 and cpus.isdigit() and int(cpus) > 0:
            return int(per_cpu) * int(cpus), f"SLURM_MEM_PER_CPU={per_cpu} x {cpus} CPUs"
        return None

    def gpu_count(self) -> int:
        """GPUs SLURM gave this node's task: the visible-device list, else SLURM_GPUS_ON_NODE."""
        visible = self.visible_gpus()
        return self.gpus_on_node if visible is None else len(visible)


def ray_token_env(token_path: object) -> dict[str, str]:
    """What makes a Ray process use the job's token (a file of mode 0600 in the job dir)."""
    return {RAY_AUTH_MODE_ENV: "token", RAY_AUTH_TOKEN_PATH_ENV: str(token_path)}


@dataclass(frozen=True)
class Settings:
    """slurm-rl's settings from the environment, read when asked ('' or False where unset)."""

    index: str  # SLURM_RL_INDEX
    clusters: str  # SLURM_RL_CLUSTERS
    login: str | None  # SLURM_RL_LOGIN (None: unset; '' or 'local': this machine)
    ssh_config: str  # SLURM_RL_SSH_CONFIG
    ssh_dir: str  # SLURM_RL_SSH_DIR
    comm_backend: str  # SLURM_RL_COMM_BACKEND
    fp16_gradients: bool  # SLURM_RL_GRADIENT_COMPRESSION=fp16
    lazy_placement: bool  # SLURM_RL_LAZY_PLACEMENT=1
    ray_fork: bool  # SLURM_RL_RAY_FORK, on unless 0/no/false/off
    ray_setup_worker: bool  # SLURM_RL_RAY_SETUP_WORKER=ray: Ray's own
    max_retries: str  # SLURM_RL_VIRTUAL_CLUSTER_MAX_RETRIES
    stacks_dir: str  # SLURM_RL_STACKS_DIR
    venv_dir: str  # SLURM_RL_VENV_DIR

    @classmethod
    def current(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        return cls(
            index=env.get(INDEX_ENV, ""),
            clusters=env.get(CLUSTERS_ENV, ""),
            login=env.get(LOGIN_ENV),
            ssh_config=env.get(SSH_CONFIG_ENV, ""),
            ssh_dir=env.get(CONTROL_DIR_ENV, ""),
            comm_backend=env.get(BACKEND_ENV, ""),
            fp16_gradients=env.get(COMPRESSION_ENV) == "fp16",
            lazy_placement=env.get(LAZY_ENV, "") == "1",
            ray_fork=env.get(FORK_ENV, "1").strip().lower() not in ("0", "no", "false", "off"),
            ray_setup_worker=env.get(SETUP_WORKER_ENV, "").strip().lower() == "ray",
            max_retries=env.get(MAX_RETRIES_ENV_TWIN, ""),
            stacks_dir=env.get(STACKS_DIR_ENV, ""),
            venv_dir=env.get(VENV_DIR_ENV, ""),
        )
