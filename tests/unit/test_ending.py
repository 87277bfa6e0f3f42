"""How a job ended, decided once (core/ending.py): the decision table row by row, the causes'
file line, and the collective timeout recognised in a real gloo timeout's output."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from slurm_rl.core import causes as c
from slurm_rl.core.causes import Cause, parse_cause
from slurm_rl.core.ending import Evidence, cause_from_reason, decide, driver_cause
from slurm_rl.core.exits import OomKills, RayDeath

OOM = (OomKills("node3", 2, "1500 MiB (--mem)"),)
STALL = "stalled for 60 s (last progress: step 3 at 14:02:07), stacks: /j/stacks"
SERVICE = "service judge failed on node2: instance 0 exited 1 after 2 restart(s); see /j/services/judge-0.log"
RAY = "Ray died: node1's gcs_server (SIGKILL): the job's Ray cluster is gone"
LAUNCH = "the job step could not start on node2 (srun: Communication connection failure); SLURM stopped it"
SIGTERM = "SIGTERM received on node1 (scancel, time limit or preemption)"


def ev(state: str | None, code: int | None, reason: str = "", **kw: object) -> Evidence:
    queued = state in ("PENDING", "RUNNING", "COMPLETING")
    finished = state not in (None, "UNKNOWN") and not queued
    return Evidence(state, queued, finished, code, reason, **kw)  # type: ignore[arg-type]


# (evidence, state shown, cause line or None): one row per rule of core/ending.py
ROWS = [
    ("pending", ev("PENDING", None), "PENDING", None),
    ("running", ev("RUNNING", None), "RUNNING", None),
    ("exit known, SLURM not done", ev("RUNNING", 0, "driver exited 0"), "COMPLETING", "completed"),
    ("completed", ev("COMPLETED", 0, "driver exited 0"), "COMPLETED", "completed"),
    ("forgotten by SLURM", ev("UNKNOWN", 0, "driver exited 0"), "COMPLETED", "completed"),
    ("forgotten, failed", ev("UNKNOWN", 1, "driver exited 1"), "FAILED", "driver_error"),
    ("driver error", ev("FAILED", 1, "driver exited 1"), "FAILED", "driver_error"),
    ("driver killed", ev("FAILED", 137, "driver killed by signal SIGKILL"), "FAILED", "driver_killed"),
    ("cancelled", ev("CANCELLED", 143, SIGTERM), "CANCELLED", "cancelled"),
    ("cancelled pending", ev("CANCELLED", None), "CANCELLED", "cancelled"),
    ("teardown", ev("CANCELLED", 143, "cancelled by slurm-rl teardown (was RUNNING)"), "CANCELLED", "cancelled"),
    # scancel as a node's step started: SLURM's SIGTERM came before its bootstrap, the SIGKILL after
    ("cancelled, a node silent", ev("CANCELLED", 143, SIGTERM, lost=["node2"]), "CANCELLED", "cancelled"),
    ("cancelled, nothing written", ev("CANCELLED", None, lost=["node2"]), "CANCELLED", "cancelled"),
    ("time limit", ev("TIMEOUT", 143, SIGTERM), "TIMEOUT", "time_limit"),
    ("time limit, driver crashed", ev("TIMEOUT", 139, f"{SIGTERM}; driver killed"), "TIMEOUT", "time_limit"),
    ("preempted", ev("PREEMPTED", 143, SIGTERM), "PREEMPTED", "preempted"),
    ("preempted after the end", ev("PREEMPTED", 0, "driver exited 0"), "COMPLETED", "completed"),
    ("node lost", ev("FAILED", 143, SIGTERM, lost=["node2"]), "FAILED", "node_lost node=node2"),
    ("node lost, nothing written", ev("FAILED", None, lost=["node2"]), "FAILED", "node_lost node=node2"),
    ("NODE_FAIL, silent", ev("NODE_FAIL", 143, SIGTERM, silent=["node3"]), "NODE_FAIL", "node_lost node=node3"),
    ("NODE_FAIL after the end", ev("NODE_FAIL", 0, "driver exited 0"), "COMPLETED", "completed"),
    ("NODE_FAIL's stop", ev("NODE_FAIL", 143, SIGTERM, silent=[]), "FAILED", "node_lost"),  # a worker's slurmd died
    ("NODE_FAIL, own cause", ev("NODE_FAIL", 1, "driver exited 1", silent=[]), "FAILED", "driver_error"),
    ("launch failure", ev("FAILED", 1, LAUNCH, lost=["node1"]), "FAILED", "launch_failure node=node2"),
    ("boot failure", ev("BOOT_FAIL", None), "BOOT_FAIL", "launch_failure"),
    ("stalled", ev("FAILED", 1, STALL), "FAILED", "stalled"),
    ("required service", ev("FAILED", 1, SERVICE), "FAILED", "required_service node=node2 name=judge"),
    ("Ray died", ev("FAILED", 1, RAY), "FAILED", "ray_died node=node1"),
    ("OOM under the failure", ev("FAILED", 1, "driver exited 1", oom=OOM), "FAILED", "oom node=node3"),
    (
        "Ray died under the driver's error",
        ev("FAILED", 1, "driver exited 1", ray_deaths=(RayDeath("node2", "raylet", "SIGKILL", 0.0),)),
        "FAILED",
        "ray_died node=node2",
    ),
    ("OOM survived", ev("COMPLETED", 0, "driver exited 0", oom=OOM), "COMPLETED", "completed"),
    ("OOM, then the time limit", ev("TIMEOUT", 143, SIGTERM, oom=OOM), "TIMEOUT", "time_limit"),
    ("stall recorded", ev("FAILED", 1, "whatever", cause=Cause(c.STALLED)), "FAILED", "stalled"),
    (
        "preflight recorded",
        ev("FAILED", 1, "x", cause=Cause(c.PREFLIGHT, "node2", check="disk")),
        "FAILED",
        "preflight node=node2 check=disk",
    ),
    (
        "collective recorded",
        ev("FAILED", 1, "driver exited 1", cause=Cause(c.COLLECTIVE_TIMEOUT)),
        "FAILED",
        "collective_timeout",
    ),
]


@pytest.mark.parametrize(("evidence", "state", "cause"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_how_a_job_ended_row_by_row(evidence: Evidence, state: str, cause: str | None) -> None:
    ending = decide(evidence)
    assert ending.state == state
    assert (ending.cause.line() if ending.cause else None) == cause


def test_the_reason_names_the_cause_not_the_consequence() -> None:
    assert decide(ev("TIMEOUT", 143, SIGTERM, time_limit="10 min")).reason == "hit the time limit (10 min)"
    lost = decide(ev("FAILED", 143, SIGTERM, lost=["node2"]))
    assert lost.reason.startswith("node2 lost: its node bootstrap never reported an end")
    assert lost.reason.endswith(f"then: {SIGTERM}") and lost.keep is None  # the nodes wrote an exit
    assert decide(ev("PREEMPTED", 143, SIGTERM)).reason.startswith("preempted by SLURM")
    oom = decide(ev("FAILED", 1, "driver exited 1", oom=OOM))
    assert "OOM: node3: the kernel's OOM killer killed 2 process(es)" in oom.reason
    dead = decide(ev("FAILED", 1, "driver exited 1", ray_deaths=(RayDeath("node1", "raylet", "SIGKILL", 0.0),)))
    assert "Ray died: node1's raylet" in dead.reason


def test_an_exit_nothing_on_the_nodes_wrote_is_kept_once() -> None:
    ending = decide(ev("FAILED", None, lost=["node2"]))
    assert ending.exit_code == 1 and ending.keep == (1, ending.reason, Cause(c.NODE_LOST, "node2"))
    assert decide(ev("RUNNING", None, lost=["node2"])).keep is None  # still in the queue: not lost yet


@pytest.mark.parametrize("cause", [Cause(k) for k in c.KINDS] + [Cause(c.PREFLIGHT, "node2", check="gpu")])
def test_a_cause_line_reads_back_and_has_words(cause: Cause) -> None:
    assert parse_cause(cause.line() + "\n") == cause
    assert cause.words() and "{" not in cause.words()
    assert cause.as_dict()["kind"] == cause.kind


def test_an_unknown_cause_line_is_no_cause() -> None:
    assert parse_cause("") is None and parse_cause("meteor node=node1") is None
    with pytest.raises(ValueError, match="unknown cause 'meteor'"):
        Cause("meteor")


def test_the_words_name_the_node_service_and_check() -> None:
    assert Cause(c.NODE_LOST, "node2").words() == "node node2 lost"
    assert Cause(c.REQUIRED_SERVICE, "node2", "judge").words() == "required service judge failed"
    assert Cause(c.PREFLIGHT, "node2", check="disk").words() == "node2 failed the preflight check disk"
    assert Cause(c.OOM).words() == "out of memory"


def test_reasons_of_an_older_slurm_rl_read_as_their_causes() -> None:
    assert cause_from_reason(127, "python /x does not exist on node2") == Cause(c.LAUNCH_FAILURE, "python")
    assert cause_from_reason(1, "node2: ray start failed; see /j/logs/node2.log") == Cause(c.LAUNCH_FAILURE, "node2")
    head = "the head node node1 was lost (the Ray head and the driver ran there)"
    assert cause_from_reason(1, head) == Cause(c.NODE_LOST, "node1")
    assert cause_from_reason(1, "") == Cause(c.UNKNOWN)


GLOO_TIMEOUT = """
import datetime, multiprocessing as mp, sys, time
import torch, torch.distributed as dist

def run(rank, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        dist.all_reduce(torch.ones(2))  # rank 1 never joins the collective
    else:
        time.sleep(6)

if __name__ == "__main__":
    port = int(sys.argv[1])
    procs = [mp.Process(target=run, args=(r, port)) for r in range(2)]
    [p.start() for p in procs]
    [p.join() for p in procs]
"""


def test_a_real_gloo_timeout_is_a_collective_timeout_and_a_plain_error_is_not(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "gloo_timeout.py"
    script.write_text(textwrap.dedent(GLOO_TIMEOUT))
    res = subprocess.run([sys.executable, str(script), str(port)], capture_output=True, text=True, timeout=120)
    assert "Timed out" in res.stderr, res.stderr[-2000:]
    assert driver_cause(1, False, res.stderr) == Cause(c.COLLECTIVE_TIMEOUT)
    assert driver_cause(1, False, "ValueError: bad config") == Cause(c.DRIVER_ERROR)
    assert driver_cause(-9, False, "") == Cause(c.DRIVER_KILLED)
    assert driver_cause(-15, True, res.stderr) == Cause(c.CANCELLED)  # the stop, not its consequence
    nccl = "[rank0]:[E1201] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE)"
    assert driver_cause(-6, False, nccl) == Cause(c.COLLECTIVE_TIMEOUT)


def test_status_of_a_job_its_stall_watch_failed_says_why_in_words_and_json(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The table's FAILED row alone said nothing; now a line says the cause and the stall, and
    --json has the cause as a field."""
    from slurm_rl.core.events import append_event
    from slurm_rl.core.exits import record_exit
    from slurm_rl.core.manifest import JobManifest
    from slurm_rl.core.paths import JobPaths
    from slurm_rl.login.reading.job_tables import print_table
    from slurm_rl.login.reading.summary import end_line, summarize
    from slurm_rl.slurm import JobState

    paths = JobPaths(tmp_path / "alice" / "exp" / "4242")
    paths.logs.mkdir(parents=True)
    JobManifest(slurm_rl_version="0", cluster_name="lab", nodes=2).write(paths.manifest)
    append_event(paths.events, "submitted", job_id=4242)
    record_exit(paths, 1, STALL, Cause(c.STALLED))  # what node 0 records (job/conclusion.py)
    append_event(paths.events, "job_end", exit_code=1)
    summary = summarize(paths, JobState(4242, "FAILED"))
    print_table([summary])
    out = capsys.readouterr().out
    assert f"job 4242: ended: stalled (no progress): {STALL}" in out, out
    assert summary.as_dict()["cause"] == {
        "kind": "stalled",
        "node": "",
        "name": "",
        "check": "",
        "text": "stalled (no progress)",
    }
    assert "  cause: stalled (no progress)" in end_line(summary).splitlines()
    assert summarize(paths, JobState(4242, "RUNNING")).as_dict()["state"] == "COMPLETING"
    assert summarize(paths, JobState(4242, "TIMEOUT")).as_dict()["cause"]["kind"] == "time_limit"
