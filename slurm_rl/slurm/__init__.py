"""SLURM as the login side sees it: ``runner`` (how a command runs), ``records`` (what it
answers), ``version`` (which SLURM, what it offers), ``site`` (its configuration, for doctor)
and ``client`` (``SlurmClient``, the only caller of SLURM). Only ``login/`` imports it."""

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
