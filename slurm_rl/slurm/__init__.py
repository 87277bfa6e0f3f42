"""The only caller of SLURM (a test holds it: no module outside this package names a SLURM
command): ``runner`` (how a command runs), ``records`` (what it answers), ``version`` (which
SLURM, what it offers), ``site`` (its configuration, for doctor), ``client`` and ``partitions``
(``SlurmClient``, for the login side), ``node_steps`` (steps of their own) and ``from_node``
(what a job's own processes ask on its nodes)."""

from .client import SlurmClient
from .records import FINISHED_STATES, JobRecord, JobState, PartitionInfo, QosLimits, parse_sacct_record, parse_tres
from .runner import Completed, Runner, subprocess_runner
from .version import SlurmVersion, supported_text

__all__ = [
    "FINISHED_STATES",
    "Completed",
    "JobRecord",
    "JobState",
    "PartitionInfo",
    "QosLimits",
    "Runner",
    "SlurmClient",
    "SlurmVersion",
    "parse_sacct_record",
    "parse_tres",
    "subprocess_runner",
    "supported_text",
]
