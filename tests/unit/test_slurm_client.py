"""The SLURM seam, table-driven: recorded outputs of sbatch, squeue, scontrol and sacct (from
the SLURM 22.05 lab) through a fake runner. Every argv is checked, and so is every state a
user can see."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from slurm_rl.core.errors import SlurmCommandError
from slurm_rl.slurm import Completed, JobState, SlurmClient

SCONTROL_RUNNING = (
    "JobId=47700975 JobName=allreduce UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901758 Nice=0 "
    "Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 "
    "Reboot=0 ExitCode=0:0 RunTime=00:00:12 TimeLimit=365-00:00:00 Partition=lab NodeList=node[1-3] "
    "BatchHost=node1 NumNodes=3 NumCPUs=3 StdOut=/var/tmp/slurm-rl/root/allreduce/47700975/logs/batch.log\n"
)
SCONTROL_CANCELLED_HELD = (
    "JobId=47700976 JobName=wrap UserId=alice(1000) JobState=CANCELLED Reason=JobHeldUser "
    "ExitCode=0:0 ReqNodeList=(null) ExcNodeList=(null) NodeList= BatchHost=\n"
)
SCONTROL_FAILED = "JobId=7 UserId=bob(1001) JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 NodeList=node2\n"
SCONTROL_TIMEOUT = "JobId=8 UserId=bob(1001) JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15 NodeList=node[1-2]\n"
NO_JOB = Completed(1, "", "slurm_load_jobs error: Invalid job id specified\n")
NO_ACCOUNTING = Completed(1, "", "Slurm accounting storage is disabled\n")


class FakeRunner:
    """Answers argv prefixes from a table, records every call."""

    def __init__(self, table: dict[str, Completed]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> Completed:
        assert timeout_s > 0
        if list(argv) == ["sinfo", "--version"]:  # read locally, once: not a call to slurmctld
            return self.table.get("sinfo --version", Completed(0, "slurm-wlm 22.05.8\n", ""))
        self.calls.append(list(argv))
        for prefix, answer in self.table.items():
            if " ".join(argv).startswith(prefix):
                return answer
        raise AssertionError(f"unexpected SLURM call {argv}")


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        pytest.param(
            {"squeue": Completed(0, "47700975|RUNNING|node[1-3]|None\n", "")},
            JobState(47700975, "RUNNING", "node[1-3]", None, "None"),
            id="squeue-running",
        ),
        pytest.param(
            {"squeue": Completed(0, "47700975|PENDING||JobHeldUser\n", "")},
            JobState(47700975, "PENDING", "", None, "JobHeldUser"),
            id="squeue-held",
        ),
        pytest.param(
            {"squeue": Completed(0, "", ""), "scontrol show job": Completed(0, SCONTROL_RUNNING, "")},
            JobState(47700975, "RUNNING", "node[1-3]", 0, "None"),
            id="scontrol-running",
        ),
        pytest.param(
            {"squeue": Completed(0, "", ""), "scontrol show job": Completed(0, SCONTROL_CANCELLED_HELD, "")},
            JobState(47700975, "CANCELLED", "", 0, "JobHeldUser"),
            id="scontrol-cancelled-held",
        ),
        pytest.param(
            {"squeue": Completed(0, "", ""), "scontrol show job": Completed(0, SCONTROL_FAILED, "")},
            JobState(47700975, "FAILED", "node2", 3, "NonZeroExitCode"),
            id="scontrol-failed",
        ),
        pytest.param(
            {"squeue": Completed(0, "", ""), "scontrol show job": Completed(0, SCONTROL_TIMEOUT, "")},
            JobState(47700975, "TIMEOUT", "node[1-2]", 0, "TimeLimit"),
            id="scontrol-timeout",
        ),
        pytest.param(
            {
                "squeue": Completed(0, "", ""),
                "scontrol show job": NO_JOB,
                "sacct": Completed(0, "47700975|CANCELLED by 0|node[1-3]|0:15\n", ""),
            },
            JobState(47700975, "CANCELLED", "node[1-3]", 0),
            id="sacct-cancelled-by",
        ),
        pytest.param(
            {
                "squeue": Completed(0, "", ""),
                "scontrol show job": NO_JOB,
                "sacct": Completed(0, "47700975|OUT_OF_MEMORY|node1|0:125\n", ""),
            },
            JobState(47700975, "OUT_OF_MEMORY", "node1", 0),
            id="sacct-oom",
        ),
        pytest.param(
            {"squeue": Completed(0, "", ""), "scontrol show job": NO_JOB, "sacct": NO_ACCOUNTING},
            JobState(47700975, "UNKNOWN"),
            id="forgotten-no-accounting",
        ),
        pytest.param(
            {
                "squeue": Completed(1, "", "slurm_load_jobs error: Invalid job id specified\n"),
                "scontrol show job": NO_JOB,
                "sacct": Completed(0, "", ""),
            },
            JobState(47700975, "UNKNOWN"),
            id="unknown-everywhere",
        ),
    ],
)
def test_job_state(table: dict[str, Completed], expected: JobState) -> None:
    runner = FakeRunner(table)
    state = SlurmClient(runner).job_state(47700975)
    got = JobState(47700975, state.state, state.nodelist, state.exit_code, state.reason)
    assert got == expected
    assert runner.calls[0][:1] == ["squeue"] and "47700975" in runner.calls[0]


@pytest.mark.parametrize(
    ("state", "finished", "in_queue"),
    [
        ("PENDING", False, True),
        ("RUNNING", False, True),
        ("COMPLETING", False, True),
        ("REQUEUED", False, True),
        ("REQUEUE_HOLD", False, True),
        ("COMPLETED", True, False),
        ("FAILED", True, False),
        ("CANCELLED", True, False),
        ("TIMEOUT", True, False),
        ("NODE_FAIL", True, False),
        ("OUT_OF_MEMORY", True, False),
        ("PREEMPTED", True, False),
        ("UNKNOWN", False, False),
    ],
)
def test_terminal_states(state: str, finished: bool, in_queue: bool) -> None:
    assert JobState(1, state).finished is finished
    assert JobState(1, state).in_queue is in_queue


@pytest.mark.parametrize(
    ("stdout", "job_id"),
    [
        ("47700976\n", 47700976),
        ("47700976;cluster-a\n", 47700976),  # --parsable on a multi-cluster site
        ("sbatch: warning: x\n123\n", 123),  # a warning before the id
    ],
)
def test_sbatch_parses_the_job_id(stdout: str, job_id: int) -> None:
    runner = FakeRunner({"sbatch": Completed(0, stdout, "")})
    assert SlurmClient(runner).sbatch("/jd/sbatch.sh", hold=True) == job_id
    assert runner.calls == [["sbatch", "--parsable", "--hold", "/jd/sbatch.sh"]]


def test_sbatch_errors_carry_argv_exit_code_and_stderr() -> None:
    stderr = (
        "sbatch: error: invalid partition specified: nope\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
    )
    runner = FakeRunner({"sbatch": Completed(1, "", stderr)})
    with pytest.raises(SlurmCommandError) as err:
        SlurmClient(runner).sbatch("/jd/sbatch.sh")
    assert err.value.argv == ["sbatch", "--parsable", "/jd/sbatch.sh"] and err.value.returncode == 1
    assert err.value.stderr == stderr
    assert "Invalid partition name specified" in str(err.value) and "partition" in str(err.value)


def test_sbatch_without_a_job_id_is_an_error() -> None:
    with pytest.raises(SlurmCommandError, match="job id"):
        SlurmClient(FakeRunner({"sbatch": Completed(0, "", "")})).sbatch("/x")


def test_release_requeue_scancel_argv() -> None:
    runner = FakeRunner({"scontrol": Completed(0, "", ""), "scancel": Completed(0, "", "")})
    client = SlurmClient(runner)
    client.release(5)
    client.requeue(5)
    client.scancel(5)
    assert runner.calls == [["scontrol", "release", "5"], ["scontrol", "requeue", "5"], ["scancel", "5"]]


@pytest.mark.parametrize(
    ("table", "owner"),
    [
        ({"squeue": Completed(0, "alice\n", "")}, "alice"),
        ({"squeue": Completed(0, "", ""), "scontrol show job": Completed(0, SCONTROL_FAILED, "")}, "bob"),
        ({"squeue": Completed(0, "", ""), "scontrol show job": NO_JOB}, None),
    ],
)
def test_job_owner(table: dict[str, Completed], owner: str | None) -> None:
    assert SlurmClient(FakeRunner(table)).job_owner(7) == owner


def test_run_on_nodes_inside_the_job_and_as_its_own_step() -> None:
    runner = FakeRunner({"srun": Completed(0, "{}\n", ""), "squeue": Completed(0, "9|node[1-2]\n", "")})
    client = SlurmClient(runner)
    client.run_on_nodes(9, ["node1", "node2"], ["py", "-m", "x"], srun_flags=["--container-image=i"])
    client.run_on_nodes(None, ["node1"], ["py"])
    asked, inside, own = runner.calls
    assert asked[:4] == ["squeue", "-h", "-j", "9"]  # a plain job: one srun
    assert inside[:3] == ["srun", "--overlap", "--jobid=9"] and "--nodelist=node1,node2" in inside
    assert inside[-4:] == ["--container-image=i", "py", "-m", "x"]
    # its own step: beside other jobs on free CPUs, with a small memory (--mem=0 is a whole node's)
    assert own[0] == "srun" and "--oversubscribe" not in own and "--jobid=9" not in own and own[-1] == "py"
    assert "--mem=256M" in own and "--cpus-per-task=1" in own


def test_an_own_step_that_slurm_cannot_place_asks_again_to_share_cpus() -> None:
    """SLURM places an --oversubscribe step only on nodes whose jobs all allow sharing, and a
    plain one only where a CPU is free: the plain one first, the other when it got no nodes."""
    busy = Completed(1, "", "srun: error: Unable to allocate resources: Requested nodes are busy\n")
    runner = FakeRunner({"srun --immediate": busy, "srun --oversubscribe": Completed(0, "{}\n", "")})
    done = SlurmClient(runner).run_on_nodes(None, ["node1", "node2"], ["py"], timeout_s=60)
    first, second = runner.calls
    assert done.returncode == 0 and "--oversubscribe" not in first and second[:2] == ["srun", "--oversubscribe"]
    assert "--immediate=15" in first and "--immediate=50" in second and second[-1] == "py"
    failed = FakeRunner({"srun": Completed(3, "", "cleanup: exit 3\n")})  # it ran, and failed: not asked again
    assert SlurmClient(failed).run_on_nodes(None, ["node1"], ["py"]).returncode == 3 and len(failed.calls) == 1


def test_attach_argv() -> None:
    assert SlurmClient.attach_argv(3, "node1")[-3:] == ["--pty", "bash", "-l"]
    assert SlurmClient.attach_argv(3, "node1", ["ray", "status"])[-2:] == ["ray", "status"]


def test_a_requeue_the_driver_asked_for_first_makes_a_no_requeue_job_requeueable() -> None:
    runner = FakeRunner({"scontrol": Completed(0, "", "")})
    SlurmClient(runner).requeue(7, make_requeueable=True)
    assert runner.calls == [["scontrol", "update", "JobId=7", "Requeue=1"], ["scontrol", "requeue", "7"]]


# sacct -n -P -o JobID,State,ExitCode,Elapsed,MaxRSS,MaxRSSNode of a 2-node slurm-rl job
SACCT_STEPS = (
    "47741002|COMPLETED|0:0|00:00:21||\n"
    "47741002.batch|COMPLETED|0:0|00:00:21|10240K|node1\n"
    "47741002.0|COMPLETED|0:0|00:00:19|412.50M|node3\n"
    "47741002.1|COMPLETED|0:0|00:00:01|2048K|node1\n"
)


def test_accounting_record_per_node_max_rss() -> None:
    runner = FakeRunner({"sacct": Completed(0, SACCT_STEPS, "")})
    record = SlurmClient(runner).accounting(47741002)
    assert record is not None
    assert (record.state, record.exit_code, record.elapsed) == ("COMPLETED", 0, "00:00:21")
    assert record.max_rss == {"node1": "10240K", "node3": "412.50M"}  # each node's largest step
    assert runner.calls[0][:3] == ["sacct", "-n", "-P"]


@pytest.mark.parametrize(
    "answer",
    [NO_ACCOUNTING, Completed(0, "", ""), Completed(0, "47741003.batch|FAILED|1:0|00:00:02|1K|node1\n", "")],
    ids=["no-accounting", "no-record", "steps-only"],
)
def test_accounting_record_absent(answer: Completed) -> None:
    assert SlurmClient(FakeRunner({"sacct": answer})).accounting(47741003) is None


def test_accounting_record_of_a_cancelled_heterogeneous_job() -> None:
    out = "47741004+0|CANCELLED by 0|0:15|00:01:02||\n47741004+1|CANCELLED by 0|0:15|00:01:02||\n"
    record = SlurmClient(FakeRunner({"sacct": Completed(0, out, "")})).accounting(47741004)
    assert record is not None and (record.state, record.exit_code, record.max_rss) == ("CANCELLED", 0, {})


def test_many_jobs_in_two_calls() -> None:
    acct = "47741002|COMPLETED|node1|0:0\n47741004+0|FAILED|node2|3:0\n47741004+1|FAILED|node3|3:0\n"
    queue = "47741009|RUNNING|node[1-2]|None\n47741010_3|PENDING||Priority\n"
    runner = FakeRunner({"sacct": Completed(0, acct, ""), "squeue": Completed(0, queue, "")})
    client = SlurmClient(runner)
    table = client.accounting_table([47741002, 47741004, 5])
    assert table[47741002] == JobState(47741002, "COMPLETED", "node1", 0)
    assert table[47741004] == JobState(47741004, "FAILED", "node2", 3) and 5 not in table
    assert set(client.my_queue()) == {47741009, "47741010_3"}  # a sweep's task is a job of its own
    assert len(runner.calls) == 2 and "47741002,47741004,5" in runner.calls[0]
    assert SlurmClient(FakeRunner({"sacct": NO_ACCOUNTING})).accounting_table([1]) == {}
    assert SlurmClient(FakeRunner({})).accounting_table([]) == {}  # nothing to ask: no call


# sacct --json -X on the 26.05 lab (data_parser/v0.0.45), trimmed to the fields slurm-rl reads; then a
# heterogeneous job's two components, an array task and an array's pending rest, in the same shape
_J = (
    '{{"job_id": {id}, "state": {{"current": ["{state}"], "reason": "None"}}, "exit_code": {{"status": ["SUCCESS"], '
    '"return_code": {{"set": true, "infinite": false, "number": {rc}}}}}, "nodes": "{nodes}", "array": {{"job_id": '
    '{array}, "task_id": {{"set": {set}, "infinite": false, "number": {task}}}, "task": "{rest}"}}, "het": '
    '{{"job_id": {het}, "job_offset": {{"set": false, "infinite": false, "number": 0}}}}}}'
)


def _job(**f: object) -> str:
    base = {
        "state": "COMPLETED",
        "rc": 0,
        "nodes": "node[1-3]",
        "array": 0,
        "set": "false",
        "task": 0,
        "rest": "",
        "het": 0,
    }
    return _J.format(**{**base, **f})


SACCT_JSON = '{{"jobs": [{}], "meta": {{"plugin": {{"data_parser": "data_parser/v0.0.45"}}}}}}'.format(
    ", ".join(
        [
            _job(id=47818639),
            _job(id=47818640, state="CANCELLED"),
            _job(id=47818641, state="FAILED", rc=3, nodes="node2"),
            _job(id=47818650, het=47818650, state="FAILED", rc=1),
            _job(id=47818651, het=47818650, state="FAILED", rc=1, nodes="node3"),
            _job(id=47818661, array=47818660, set="true", task=1, state="TIMEOUT"),
            _job(id=47818660, array=47818660, rest="2-3", state="PENDING", nodes="None assigned"),
        ]
    )
)


def test_on_23_02_and_later_the_states_come_from_sacct_json() -> None:
    runner = FakeRunner(
        {"sinfo --version": Completed(0, "slurm 26.05.5\n", ""), "sacct --json": Completed(0, SACCT_JSON, "")}
    )
    table = SlurmClient(runner).accounting_table([47818639, 47818640, 47818641, 47818650, "47818660_1"])
    assert runner.calls == [["sacct", "--json", "-X", "-j", "47818639,47818640,47818641,47818650,47818660_1"]]
    assert table == {
        47818639: JobState(47818639, "COMPLETED", "node[1-3]", 0),
        47818640: JobState(47818640, "CANCELLED", "node[1-3]", 0),
        47818641: JobState(47818641, "FAILED", "node2", 3),
        47818650: JobState(47818650, "FAILED", "node[1-3]", 1),  # the first component, as text has it
        "47818660_1": JobState("47818660_1", "TIMEOUT", "node[1-3]", 0),
    }


def test_an_unreadable_json_answer_falls_back_to_text() -> None:
    runner = FakeRunner(
        {
            "sinfo --version": Completed(0, "slurm 24.11.5\n", ""),
            "sacct --json": Completed(0, "sacct: error: plugin data_parser not found\n", ""),
            "sacct -n": Completed(0, "47741002|COMPLETED|node1|0:0\n", ""),
        }
    )
    assert SlurmClient(runner).accounting_table([47741002]) == {47741002: JobState(47741002, "COMPLETED", "node1", 0)}
    assert [c[1] for c in runner.calls] == ["--json", "-n"]


def test_a_pending_heterogeneous_job_says_each_components_reason_and_status_names_the_parts() -> None:
    from slurm_rl.core.parts import Part
    from slurm_rl.login.reading.waiting import waits_for

    out = "47973484+1|PENDING||Priority\n47973484+0|PENDING||Resources\n47973485|PENDING||QOSMaxJobsPerUserLimit\n"
    client = SlurmClient(FakeRunner({"squeue": Completed(0, out, "")}))
    state = client.job_state(47973484)
    assert (state.state, state.components) == ("PENDING", ((0, "Resources"), (1, "Priority")))
    assert client.my_queue()[47973484].components == state.components
    parts = {"trainer": Part(nodes=1), "judge": Part(nodes=1, service="serve {port}")}
    assert waits_for(state, parts) == (
        "trainer: free nodes: the nodes it asks for are busy (Resources); "
        "judge: jobs of higher priority ahead of it (Priority)"
    )
    assert waits_for(client.my_queue()[47973485], {}) == (
        "a limit of its QOS (QOSMaxJobsPerUserLimit; `sacctmgr show qos` shows it)"
    )
    assert waits_for(JobState(7, "RUNNING"), parts) == ""


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (
            "ReqNodeNotAvail, UnavailableNodes:node[1-3]",
            "(`sinfo -R` says why) (ReqNodeNotAvail: UnavailableNodes:node[1-3])",
        ),
        ("PartitionDown", "its partition, which is down (an administrator brings it up) (PartitionDown)"),
        ("AssocGrpGRES", "a limit of its account (AssocGrpGRES; `sacctmgr show assoc` shows it)"),
        ("Dependency", "the job it depends on (Dependency)"),
        ("BeginTime", "its start time (--begin) (BeginTime)"),
        ("Reservation", "its reservation to start (Reservation)"),
        ("SomethingNew", "SomethingNew"),
    ],
)
def test_every_reason_a_user_can_act_on_is_said_in_words(reason: str, said: str) -> None:
    from slurm_rl.login.reading.waiting import waits_for

    assert waits_for(JobState(7, "PENDING", reason=reason), {}).endswith(said)


def test_a_pending_jobs_place_is_slurms_estimate_and_the_jobs_of_higher_priority_ahead() -> None:
    from datetime import datetime

    from slurm_rl.login.reading.waiting import queue_place

    now = datetime(2026, 12, 5, 12, 0).timestamp()
    mine = "4801|PENDING||Priority|2026-12-05T14:05:00|gpu|1000\n"
    queue = "4790|900\n4801|1000\n4802|1500\n4803_[1-4]|2000\n4804+0|10\n"
    runner = FakeRunner({"squeue -h -j": Completed(0, mine, ""), "squeue -h -t": Completed(0, queue, "")})
    client = SlurmClient(runner)
    state = client.job_state(4801)
    assert (state.start, state.partition, state.priority) == ("2026-12-05T14:05:00", "gpu", 1000)
    ahead = client.jobs_ahead(state)
    assert ahead == 2 and runner.calls[-1][-4:] == ["-p", "gpu", "-o", "%i|%Q"]  # 4802 and the array, not itself
    assert queue_place(state, ahead, now) == (
        "starts ~2 h 5 min from now, at 14:05 (SLURM's estimate); 2 jobs ahead of it in partition gpu"
    )
    unplanned = JobState(4801, "PENDING", reason="Priority", start="N/A")
    assert queue_place(unplanned, None, now) == "" and client.jobs_ahead(JobState(4801, "RUNNING")) is None


def test_auto_says_how_many_jobs_wait_where_the_job_would_not_start_now() -> None:
    """`--cluster auto`'s line for a cluster that would not start the job at once: SLURM's
    estimate and the jobs waiting in its partition (anyone's: the job has no priority yet)."""
    from slurm_rl.login.submission.choose import Offer

    queue = "4790|900\n4801|1000\n4803_[1-4]|2000\n"
    runner = FakeRunner({"squeue -h -t": Completed(0, queue, "")})
    client = SlurmClient(runner)
    assert client.jobs_waiting("gpu") == 3 and runner.calls[-1][-4:] == ["-p", "gpu", "-o", "%i|%Q"]
    assert client.jobs_waiting(None) == 3 and "-p" not in runner.calls[-1]
    now = 1_000_000.0
    later = Offer("a", now + 2 * 3600 + 300, waiting=3)
    assert later.words(now) == "cluster a: starts in ~2 h 5 min, 3 jobs waiting there"
    assert Offer("a", now + 600, waiting=1).words(now) == "cluster a: starts in ~10 min, 1 job waiting there"
    assert Offer("b", now + 30).words(now) == "cluster b: starts now"
    assert Offer("a", now + 900, waiting=0).words(now) == "cluster a: starts in ~15 min"
    held = Offer("a", now + 365 * 86400, waiting=2)  # SLURM's estimate behind jobs without an end
    assert held.words(now) == "cluster a: no start in sight (what runs there sets no end), 2 jobs waiting there"
    failing = SlurmClient(FakeRunner({"squeue -h -t": Completed(1, "", "slurm_load_jobs error")}))
    assert failing.jobs_waiting("gpu") is None


def test_into_a_heterogeneous_job_every_srun_names_its_component() -> None:
    """SLURM starts nothing for an `srun --jobid` into a het job without --het-group ("No
    directives to start application on any available hetjob components", seen on the lab when
    a job of parts was torn down): one srun per component, each with its own nodes."""
    runner = FakeRunner({"squeue": Completed(0, "5+1|node1\n5+0|node[2-3]\n", ""), "srun": Completed(0, "r\n", "")})
    client = SlurmClient(runner)
    assert client.het_groups(5) == {"node1": 1, "node2": 0, "node3": 0}
    done = client.run_on_nodes(5, ["node3", "node1", "node2"], ["clean"])
    sruns = [c for c in runner.calls if c[0] == "srun"]
    said = [[f for f in c if f.startswith(("--het-group", "--nodelist"))] for c in sruns]
    assert said == [["--nodelist=node3,node2", "--het-group=0"], ["--nodelist=node1", "--het-group=1"]], said
    assert done.stdout == "r\nr\n" and done.returncode == 0
    argv = SlurmClient.attach_argv(5, "node1", ["hostname"], het_group=1)
    assert argv[:4] == ["srun", "--overlap", "--jobid=5", "--het-group=1"] and argv[-1] == "hostname"
