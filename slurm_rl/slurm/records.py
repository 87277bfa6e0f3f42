"""What SLURM answers, as records: job states (which are final, which are in the queue; from
sacct's text or, on 23.02 and later, its JSON), sacct's per-job record, a partition's sinfo line,
a QOS's limits and TRES strings."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from ..core.job_ids import as_slurm_id, is_slurm_job_id
from ..core.nodelist import expand_hostlist

# Job states in which the job will not run again.
FINISHED_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "SPECIAL_EXIT",
    "REVOKED",
}


@dataclass(frozen=True)
class PartitionInfo:
    name: str
    nodes: int
    cpus: int  # of its largest node, as are memory and GPUs
    mem_mb: int
    gpus: int
    default: bool
    max_time: str | None = None  # sinfo's time limit (a SLURM time), None for infinite or unknown
    gres: tuple[str, ...] = ()  # its nodes' GPU GRES as sinfo names them: gpu:labgpu:4, gpu:8

    @property
    def gpus_typed(self) -> bool:
        return any(g.count(":") >= 2 for g in self.gres)


SINFO_NODE_FORMAT = "%P|%n|%c|%m|%G|%l"  # one line per node and partition


def parse_sinfo_nodes(stdout: str) -> dict[str, PartitionInfo]:
    """``sinfo -h -N -o SINFO_NODE_FORMAT`` as one PartitionInfo per partition: its node count,
    its largest node's CPUs, memory and GPUs, its GPU GRES and time limit, and the default."""
    nodes: dict[str, set[str]] = {}
    out: dict[str, PartitionInfo] = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5:  # an older sinfo without the time limit column
            parts.append("")
        if len(parts) != 6 or not parts[2].rstrip("+").isdigit():
            continue
        name, default = parts[0].rstrip("*"), parts[0].endswith("*")
        nodes.setdefault(name, set()).add(parts[1])
        mem = int(parts[3].rstrip("+")) if parts[3].rstrip("+").isdigit() else 0
        # gpu:labgpu:4(S:0-1),gpu:8: the socket bindings dropped; a GPU GRES ends with its count
        gres = {re.sub(r"\(.*?\)", "", g) for g in parts[4].split(",") if g.startswith("gpu")}
        gpus = sum(int(g.rsplit(":", 1)[1]) for g in gres if ":" in g and g.rsplit(":", 1)[1].isdigit())
        prev = out.get(name, PartitionInfo(name, 0, 0, 0, 0, default))
        out[name] = PartitionInfo(
            name,
            len(nodes[name]),
            max(prev.cpus, int(parts[2].rstrip("+"))),
            max(prev.mem_mb, mem),
            max(prev.gpus, gpus),
            default or prev.default,
            parts[5] if re.fullmatch(r"[\d:-]+", parts[5]) else None,
            tuple(sorted(gres.union(prev.gres))),
        )
    return out


@dataclass(frozen=True)
class QosLimits:
    """A QOS's limits on one job, as sacctmgr reports them (what is absent is unlimited)."""

    name: str
    max_wall: str | None  # a SLURM time
    per_job: dict[str, int]  # TRES -> most per job, e.g. {"node": 1, "cpu": 64, "gres/gpu": 8}
    per_node: dict[str, int]


def parse_tres(text: str) -> dict[str, int]:
    """``cpu=8,gres/gpu=4,node=2`` -> {"cpu": 8, "gres/gpu": 4, "node": 2} (sizes like 64G skipped)."""
    out = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key and value.isdigit():
            out[key] = int(value)
    return out


@dataclass(frozen=True)
class JobState:
    job_id: int | str  # a job, or a job array's task ("1234_5")
    state: str  # e.g. PENDING, RUNNING, COMPLETED; "UNKNOWN" if SLURM forgot it
    nodelist: str = ""
    exit_code: int | None = None
    reason: str = ""
    components: tuple[tuple[int, str], ...] = ()  # a heterogeneous job's (component, SLURM reason) while queued
    start: str = ""  # a queued job's start, SLURM's estimate while pending (ISO, local time); "" unknown
    partition: str = ""  # where it is queued (a job of parts: its first component's)
    priority: int | None = None  # SLURM's priority while queued (higher goes first)

    @property
    def finished(self) -> bool:
        return self.state.split()[0] in FINISHED_STATES

    @property
    def in_queue(self) -> bool:
        return self.state in {
            "PENDING",
            "RUNNING",
            "CONFIGURING",
            "COMPLETING",
            "SUSPENDED",
            "REQUEUED",
            "RESIZING",
            "SIGNALING",
            "STAGE_OUT",
            "REQUEUE_HOLD",
        }


@dataclass(frozen=True)
class JobRecord:
    """SLURM's accounting record of a job (sacct), kept after squeue and scontrol forgot it."""

    job_id: int | str
    state: str
    exit_code: int | None
    elapsed: str  # [D-]HH:MM:SS as sacct prints it
    max_rss: dict[str, str]  # node -> the largest resident set of any task of the job there

    def as_dict(self) -> dict[str, object]:
        return {"state": self.state, "exit_code": self.exit_code, "elapsed": self.elapsed, "max_rss": self.max_rss}


def parse_sacct_record(job_id: int | str, stdout: str) -> JobRecord | None:
    """``sacct -n -P -o JobID,State,ExitCode,Elapsed,MaxRSS,MaxRSSNode`` of one job: the
    allocation's line, then one per step (``J.batch``, ``J.0``...) with its largest task's RSS
    and that task's node."""
    alloc: list[str] | None = None
    rss: dict[str, tuple[int, str]] = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 6:
            continue
        jid, state, code, elapsed, max_rss, node = parts
        if "." not in jid and jid.split("+")[0] == str(job_id):  # the allocation (a het job: J+0)
            alloc = alloc or [state, code, elapsed]
        elif jid.split(".")[0].split("+")[0] == str(job_id) and max_rss and node:
            size = _bytes(max_rss)
            if size >= rss.get(node, (-1, ""))[0]:
                rss[node] = (size, max_rss)
    if alloc is None:
        return None
    state, code, elapsed = alloc
    head = code.split(":")[0]
    per_node = {n: v for n, (_, v) in sorted(rss.items())}
    return JobRecord(job_id, state.split()[0], int(head) if head.isdigit() else None, elapsed, per_node)


def parse_sacct_json(text: str) -> list[JobState]:
    """``sacct --json -X`` (the data_parser plugins of 23.02 and later: v0.0.39 to v0.0.45 agree
    on these fields): one state per allocation, named as sacct's text names it, a heterogeneous
    job by its first component's id and an array task ARRAY_TASK; an array's still-pending
    remainder ("1234_[2-3]") is left out, as in text."""
    out = []
    for job in json.loads(text).get("jobs", []):
        array, het = job.get("array") or {}, job.get("het") or {}
        task = array.get("task_id") or {}
        if array.get("job_id") and task.get("set"):
            key: int | str = f"{array['job_id']}_{task['number']}"
        elif array.get("task"):
            continue
        else:
            key = het.get("job_id") or job["job_id"]
        state = job.get("state") or {}
        current = state.get("current") if isinstance(state, dict) else state
        name = current[0] if isinstance(current, list) and current else str(current or "UNKNOWN")
        rc = (job.get("exit_code") or {}).get("return_code")
        code = rc.get("number") if isinstance(rc, dict) and rc.get("set") else rc if isinstance(rc, int) else None
        out.append(JobState(key, name, job.get("nodes") or "", code))
    return out


def _bytes(size: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    try:
        return int(float(size[:-1]) * units[size[-1]]) if size[-1:] in units else int(size)
    except ValueError:
        return 0


QUEUE_FORMAT = "%i|%T|%N|%r|%S|%P|%Q"  # squeue's: id, state, nodes, reason, start, partition, priority


def queue_states(lines: list[str], only: str | None = None) -> dict[int | str, JobState]:
    """``squeue -o QUEUE_FORMAT`` lines as states (of job ``only``, if given); a heterogeneous
    job's components (``<id>+K``) as one state with each component's reason."""
    out: dict[int | str, JobState] = {}
    for line in lines:
        parts = line.strip().split("|")
        head, _, comp = parts[0].partition("+")
        if len(parts) not in (4, 7) or not is_slurm_job_id(head) or (only is not None and head != only):
            continue
        key = as_slurm_id(head)
        start, partition, priority = parts[4:7] if len(parts) == 7 else ("", "", "")
        start = start if start[:1].isdigit() else ""  # N/A, Unknown
        prio = int(priority) if priority.isdigit() else None
        seen = out.get(key) or JobState(key, parts[1], parts[2], None, parts[3], (), start, partition, prio)
        if comp.isdigit():
            seen = replace(seen, components=tuple(sorted({*seen.components, (int(comp), parts[3])})))
        out[key] = seen
    return out


def component_of_nodes(lines: list[str]) -> dict[str, int]:
    """``squeue -o %i|%N`` lines of a heterogeneous job (``<id>+K|nodes``): node -> K."""
    out: dict[str, int] = {}
    for line in lines:
        jid, _, nodelist = line.strip().partition("|")
        comp = jid.partition("+")[2]
        for node in expand_hostlist(nodelist) if comp.isdigit() and nodelist else []:
            out.setdefault(node, int(comp))
    return out
