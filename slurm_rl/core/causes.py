"""Why a job ended, as one cause from a documented set (docs/causes.md lists them with the words
`status` says): what `status --json` gives as ``cause``, what the job's nodes record beside its
exit (the ``exit_cause`` file, one line: the kind, then ``key=value`` for the node, the service,
the check), and what ``--retry-on`` names. Data only: core/ending.py decides which one it was."""

from __future__ import annotations

from dataclasses import dataclass

COMPLETED = "completed"
DRIVER_ERROR = "driver_error"  # the driver exited non-zero (its own bug, an exception)
DRIVER_KILLED = "driver_killed"  # the driver died of a signal nobody sent as a stop
CANCELLED = "cancelled"  # scancel, slurm-rl teardown, a stop from outside
TIME_LIMIT = "time_limit"
PREEMPTED = "preempted"
NODE_LOST = "node_lost"  # NODE: died, or SLURM lost it, while the job ran
LAUNCH_FAILURE = "launch_failure"  # NODE: the job could not start there (srun, Ray's start, setup)
OOM = "oom"  # NODE: the kernel's OOM killer killed processes of the job there
STALLED = "stalled"  # no progress for --stall-timeout
REQUIRED_SERVICE = "required_service"  # NAME (on NODE): a required service failed past its restarts
COLLECTIVE_TIMEOUT = "collective_timeout"  # a gloo/NCCL collective timed out
PREFLIGHT = "preflight"  # NODE, CHECK: a node failed a check before the driver started
RAY_DIED = "ray_died"  # NODE: a Ray daemon of the job died there
UNKNOWN = "unknown"  # ended, and nothing says how

KINDS = (
    COMPLETED,
    DRIVER_ERROR,
    DRIVER_KILLED,
    CANCELLED,
    TIME_LIMIT,
    PREEMPTED,
    NODE_LOST,
    LAUNCH_FAILURE,
    OOM,
    STALLED,
    REQUIRED_SERVICE,
    COLLECTIVE_TIMEOUT,
    PREFLIGHT,
    RAY_DIED,
    UNKNOWN,
)

_WORDS = {
    COMPLETED: "completed",
    DRIVER_ERROR: "the driver failed",
    DRIVER_KILLED: "the driver was killed",
    CANCELLED: "cancelled",
    TIME_LIMIT: "hit its time limit",
    PREEMPTED: "preempted by SLURM",
    NODE_LOST: "node {node} lost",
    LAUNCH_FAILURE: "could not start on {node}",
    OOM: "out of memory on {node}",
    STALLED: "stalled (no progress)",
    REQUIRED_SERVICE: "required service {name} failed",
    COLLECTIVE_TIMEOUT: "a collective timed out",
    PREFLIGHT: "{node} failed the preflight check {check}",
    RAY_DIED: "Ray died on {node}",
    UNKNOWN: "ended, cause unknown",
}
_NO_NODE = {NODE_LOST: "a node lost", LAUNCH_FAILURE: "could not start on a node", OOM: "out of memory",
            RAY_DIED: "Ray died"}  # fmt: skip


@dataclass(frozen=True)
class Cause:
    kind: str
    node: str = ""
    name: str = ""  # a service's name
    check: str = ""  # a preflight check's name

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown cause {self.kind!r}; one of {', '.join(KINDS)}")

    def words(self) -> str:
        """For people: "node node2 lost", "required service judge failed"."""
        if not self.node and self.kind in _NO_NODE:
            return _NO_NODE[self.kind]
        return _WORDS[self.kind].format(node=self.node or "?", name=self.name or "?", check=self.check or "?")

    def line(self) -> str:
        """The ``exit_cause`` file's line: ``node_lost node=node2``."""
        fields = (f"{k}={v}" for k, v in (("node", self.node), ("name", self.name), ("check", self.check)) if v)
        return " ".join((self.kind, *fields))

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "node": self.node, "name": self.name, "check": self.check, "text": self.words()}


def parse_cause(text: str) -> Cause | None:
    """An ``exit_cause`` line back; None for an empty or unknown one (another slurm-rl's)."""
    kind, *rest = text.split() or [""]
    fields = dict(f.split("=", 1) for f in rest if "=" in f)
    try:
        return Cause(kind, fields.get("node", ""), fields.get("name", ""), fields.get("check", ""))
    except ValueError:
        return None
