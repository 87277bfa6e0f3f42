"""The one place that calls SLURM (sbatch, squeue, sacct, scancel, scontrol, srun, sinfo,
sacctmgr): ``SlurmClient``, thin typed wrappers over the commands slurm-rl needs, each through
the runner (runner.py) and parsed into records (records.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..core.errors import SlurmCommandError, UsageError
from ..core.job_ids import as_slurm_id, is_array_task, is_slurm_job_id
from .node_steps import run_own_step
from .partitions import PartitionQueries
from .records import (
    QUEUE_FORMAT,
    JobRecord,
    JobState,
    PartitionInfo,
    component_of_nodes,
    parse_sacct_json,
    parse_sacct_record,
    queue_states,
)
from .runner import Completed, Runner, subprocess_runner, with_slurm_conf
from .version import SlurmVersion, require_supported


def step_flags(account: str | None, qos: str | None, reservation: str | None = None) -> list[str]:
    """The account, QOS and reservation flags of a step outside a job's allocation (cleanup,
    the image cache's): sites that enforce them refuse a step without them."""
    pairs = (("--account", account), ("--qos", qos), ("--reservation", reservation))
    return [f"{flag}={value}" for flag, value in pairs if value]


class SlurmClient(PartitionQueries):
    """Thin, typed wrappers over the SLURM commands slurm-rl needs."""

    def __init__(
        self, runner: Runner = subprocess_runner, timeout_s: float = 30.0, slurm_conf: str | None = None
    ) -> None:
        self.runner = with_slurm_conf(runner, slurm_conf) if slurm_conf else runner  # one cluster of several here
        self.timeout_s = timeout_s
        self.calls = 0
        self._partitions: dict[str, PartitionInfo] | None = None
        self._version: SlurmVersion | None = None

    def run(self, argv: Sequence[str], timeout_s: float | None = None, check: bool = True, hint: str = "") -> Completed:
        self.calls += 1  # every SLURM command this client ran (slurmctld load: sites police it)
        res = self.runner(argv, timeout_s or self.timeout_s)
        if check and res.returncode != 0:
            raise SlurmCommandError(argv, res.returncode, res.stdout, res.stderr, hint=hint)
        return res

    def version(self) -> SlurmVersion:
        """The site's SLURM, asked once per client (``sinfo --version`` needs no controller);
        one that is older than slurm-rl supports is refused in one line."""
        if self._version is None:
            out = self.run(["sinfo", "--version"], hint="is this a SLURM login node?").stdout
            self._version = require_supported(SlurmVersion.parse(out))
        return self._version

    def _speaks_json(self) -> bool:
        try:
            return self.version().json_parsers
        except (SlurmCommandError, UsageError, ValueError):
            return False

    def sbatch(self, script: str, hold: bool = False, extra: Sequence[str] = (), env: Sequence[str] = ()) -> int:
        """Submit ``script``; its job id. ``env``: env(1)'s arguments for sbatch's environment
        (``-u NAME`` to drop a variable, ``NAME=VALUE`` to set one)."""
        argv = [*(["env", *env] if env else []), "sbatch", "--parsable", *(["--hold"] if hold else []), *extra, script]
        out = self.run(argv, hint="check the partition, account and limits in your spec").stdout.strip()
        m = re.match(r"^(\d+)", out.splitlines()[-1] if out else "")
        if not m:
            raise SlurmCommandError(argv, 0, out, "", hint="could not read a job id from sbatch's output")
        return int(m.group(1))

    def estimated_start(self, script: str) -> str:
        """When SLURM would start ``script`` now (``sbatch --test-only``: nothing is submitted), ISO
        local time; a script SLURM would refuse is SlurmCommandError with its reason."""
        res = self.run(["sbatch", "--test-only", script], hint="what this cluster would refuse")
        m = re.search(r"to start at (\S+)", res.stderr + res.stdout)
        if not m:
            raise SlurmCommandError(["sbatch", "--test-only", script], 0, res.stdout, res.stderr, hint="no start time")
        return m.group(1)

    def release(self, job_id: int | str) -> None:
        self.run(["scontrol", "release", str(job_id)])

    def scancel(self, job_id: int | str) -> None:
        self.run(["scancel", str(job_id)])

    def requeue(self, job_id: int | str, make_requeueable: bool = False) -> None:
        """Requeue a running job. A job submitted ``--no-requeue`` refuses ("presently
        disabled"): ``make_requeueable`` first allows it (for a requeue the driver asked for)."""
        if make_requeueable:
            self.run(["scontrol", "update", f"JobId={job_id}", "Requeue=1"])
        self.run(["scontrol", "requeue", str(job_id)])

    def job_state(self, job_id: int | str) -> JobState:
        """State from squeue while queued, else sacct, else scontrol; UNKNOWN if all forgot it."""
        res = self.run(["squeue", "-h", "-j", str(job_id), "-o", QUEUE_FORMAT], check=False)
        queued = queue_states(res.stdout.splitlines(), only=str(job_id))  # a het job: <id>+0, <id>+1
        if queued:
            return replace(next(iter(queued.values())), job_id=job_id)
        res = self.run(["scontrol", "show", "job", "-o", str(job_id)], check=False)
        if res.returncode == 0 and "JobState=" in res.stdout:
            fields = dict(re.findall(r"(\w+)=(\S*)", res.stdout))
            code = fields.get("ExitCode", "")
            return JobState(
                job_id,
                fields.get("JobState", "UNKNOWN"),
                fields.get("NodeList", ""),
                int(code.split(":")[0]) if code[:1].isdigit() else None,
                fields.get("Reason", ""),
            )
        return self.accounting_table([job_id]).get(job_id) or JobState(job_id, "UNKNOWN")

    def accounting(self, job_id: int | str) -> JobRecord | None:
        """SLURM's accounting record of a job (state, exit code, elapsed, MaxRSS per node), or
        None where the site keeps no accounting or it has no record of the job."""
        res = self.run(
            ["sacct", "-n", "-P", "-j", str(job_id), "-o", "JobID,State,ExitCode,Elapsed,MaxRSS,MaxRSSNode"],
            check=False,
        )
        return parse_sacct_record(job_id, res.stdout) if res.returncode == 0 else None

    def my_queue(self, check: bool = False) -> dict[int | str, JobState]:
        """Every job of the calling user that SLURM still queues or runs, in one squeue call
        (``check``: a controller that does not answer is SlurmCommandError, not an empty queue)."""
        # -r: one line per array task, pending ones too (else "1234_[2-3%2]")
        res = self.run(["squeue", "-h", "-r", "--me", "-o", QUEUE_FORMAT], check=check, hint="is its slurmctld up?")
        return queue_states(res.stdout.splitlines())

    def jobs_ahead(self, state: JobState) -> int | None:
        """How many pending jobs of its partition SLURM would start before this pending one (a
        higher priority), anyone's; None where SLURM does not say."""
        if state.state != "PENDING" or not state.partition or state.priority is None:
            return None
        rows = self._pending(state.partition)
        if rows is None:
            return None
        mine = str(state.job_id).partition("_")[0]
        others = [(jid, prio) for jid, prio in rows if re.split(r"[_+]", jid)[0] != mine]
        return sum(1 for _, prio in others if prio > state.priority)

    def jobs_waiting(self, partition: str | None) -> int | None:
        """How many jobs, anyone's, wait in a partition (None: the cluster's default) right now."""
        rows = self._pending(partition)
        return None if rows is None else len(rows)

    def _pending(self, partition: str | None) -> list[tuple[str, int]] | None:
        where = ["-p", partition.split(",")[0]] if partition else []
        res = self.run(["squeue", "-h", "-t", "PENDING", *where, "-o", "%i|%Q"], check=False)
        if res.returncode != 0:
            return None
        rows = [line.split("|") for line in res.stdout.splitlines() if line.count("|") == 1]
        return [(jid, int(prio)) for jid, prio in rows if prio.isdigit()]

    def accounting_table(self, job_ids: Sequence[int | str]) -> dict[int | str, JobState]:
        """The states of many jobs from SLURM's accounting, in one sacct call ({} where the site
        keeps no accounting, or for jobs it has no record of)."""
        if not job_ids:
            return {}
        ids = ",".join(map(str, job_ids))
        out: dict[int | str, JobState] = {}
        if self._speaks_json():  # structured where SLURM has it; text if that answer is unreadable
            res = self.run(["sacct", "--json", "-X", "-j", ids], check=False)
            try:
                for state in parse_sacct_json(res.stdout) if res.returncode == 0 else []:
                    out.setdefault(state.job_id, state)
                return out
            except (ValueError, KeyError, TypeError, AttributeError):
                out.clear()
        fields = "JobID,State,NodeList,ExitCode"
        res = self.run(["sacct", "-n", "-X", "-P", "-j", ids, "-o", fields], check=False)
        for line in res.stdout.splitlines() if res.returncode == 0 else []:
            parts = line.strip().split("|")
            head = parts[0].split("+")[0]  # a heterogeneous job lists as <id>+0, <id>+1
            if len(parts) != 4 or not is_slurm_job_id(head):
                continue
            code = parts[3].split(":")[0]
            key = as_slurm_id(head)
            out.setdefault(key, JobState(key, parts[1].split()[0], parts[2], int(code) if code.isdigit() else None))
        return out

    def het_groups(self, job_id: int | str) -> dict[str, int]:
        """A running heterogeneous job's nodes, each with its component ({} for any other job):
        an ``srun --jobid`` into such a job starts nothing without ``--het-group`` (SLURM: "No
        directives to start application on any available hetjob components")."""
        res = self.run(["squeue", "-h", "-j", str(job_id), "-o", "%i|%N"], check=False)
        return component_of_nodes(res.stdout.splitlines())

    @staticmethod
    def attach_argv(
        job_id: int,
        node: str,
        command: list[str] | None = None,
        pty: bool | None = None,
        het_group: int | None = None,
    ) -> list[str]:
        """argv for a shell (or ``command``, which a container runtime may have wrapped to run
        inside the job's container) inside a running job, on ``node`` (in heterogeneous
        component ``het_group``). ``pty``: a terminal for it (default: when there is no command,
        a login shell)."""
        group = [] if het_group is None else [f"--het-group={het_group}"]
        base = ["srun", "--overlap", f"--jobid={job_id}", *group, f"--nodelist={node}", "--nodes=1", "--ntasks=1"]
        run = command or ["bash", "-l"]
        return [*base, "--pty", *run] if (pty if pty is not None else not command) else [*base, *run]

    def numeric_job_id(self, job_id: int | str) -> int:
        """The plain SLURM job id that srun --jobid takes: an array task ("1234_5") has its
        own once it started (scontrol's JobId); a plain id is itself."""
        if not is_array_task(job_id):
            return int(job_id)
        res = self.run(["scontrol", "show", "job", "-o", str(job_id)], check=False)
        m = re.search(r"\bJobId=(\d+)", res.stdout) if res.returncode == 0 else None
        if m is None:
            raise UsageError(f"job {job_id}: SLURM no longer knows this array task (it has ended)")
        return int(m.group(1))

    def job_output_path(self, job_id: int | str) -> str | None:
        """The StdOut path SLURM recorded for a job it still knows (slurm-rl's is
        <job dir>/logs/batch.log), else None."""
        res = self.run(["scontrol", "show", "job", "-o", str(job_id)], check=False)
        m = re.search(r"\bStdOut=(\S+)", res.stdout) if res.returncode == 0 else None
        return m.group(1) if m else None

    def queue_summary(self, job_id: int | str) -> tuple[str, str, str]:
        """(state, job name, time left) of a job squeue still lists, as squeue prints them;
        ("", "", "") for a job it does not."""
        res = self.run(["squeue", "-h", "-j", str(job_id), "-o", "%T|%j|%L"], check=False)
        first = res.stdout.strip().splitlines()[:1]
        state, name, left = ([*first[0].split("|"), "", ""] if first else ["", "", ""])[:3]
        return state, name, left

    def job_owner(self, job_id: int | str) -> str | None:
        """The user name owning a job SLURM still knows, else None."""
        res = self.run(["squeue", "-h", "-j", str(job_id), "-o", "%u"], check=False)
        owner = res.stdout.strip()
        if owner:
            return owner.splitlines()[0]
        res = self.run(["scontrol", "show", "job", "-o", str(job_id)], check=False)
        m = re.search(r"UserId=([^(\s]+)", res.stdout)
        return m.group(1) if m else None

    def run_on_nodes(
        self,
        job_id: int | None,
        nodes: list[str],
        argv: list[str],
        timeout_s: float = 60.0,
        srun_flags: Sequence[str] = (),
    ) -> Completed:
        """Run argv once on each node: inside job ``job_id`` (srun --overlap; a heterogeneous
        job's, one srun per component) while its allocation lives, else as a short step of its
        own on exactly those nodes."""
        groups = self.het_groups(job_id) if job_id is not None else {}
        if groups:
            done = [
                self._srun_on_nodes(job_id, mine, argv, timeout_s, [*srun_flags, f"--het-group={k}"])
                for k in sorted(set(groups.values()))
                if (mine := [n for n in nodes if groups.get(n) == k])
            ]
            return Completed(
                max((c.returncode for c in done), default=0),
                "".join(c.stdout for c in done),
                "".join(c.stderr for c in done),
            )
        return self._srun_on_nodes(job_id, nodes, argv, timeout_s, srun_flags)

    def _srun_on_nodes(
        self, job_id: int | None, nodes: list[str], argv: list[str], timeout_s: float, srun_flags: Sequence[str]
    ) -> Completed:
        common = [
            f"--nodelist={','.join(nodes)}",
            f"--nodes={len(nodes)}",
            f"--ntasks={len(nodes)}",
            "--ntasks-per-node=1",
            "--kill-on-bad-exit=0",
            "--quiet",
        ]
        if job_id is None:  # a step of its own, beside whatever other jobs run there
            return run_own_step(self.run, common, argv, timeout_s, srun_flags)
        srun = ["srun", "--overlap", f"--jobid={job_id}", *common]
        return self.run([*srun, *srun_flags, *argv], timeout_s=timeout_s, check=False)
