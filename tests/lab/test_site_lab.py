"""A real site's rules on the lab's accounting (slurmdbd + MariaDB, associations/limits/QOS
enforced; see tests/lab/slurm-lab-accounting.sh): the options sites require reach SLURM, a job
SLURM refuses costs nothing, the steps slurm-rl starts for a job carry its account and QOS, and
SLURM's record of a finished job is shown."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import LAB, run_cli
from tests.lab.helpers import (
    EXPERIMENTS,
    SPEC,
    STATE,
    assert_no_leftovers,
    job_cluster,
    job_dir,
    lab_spec,
    start,
    submit,
    wait_for,
    wait_gone,
    wait_ready,
)

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def site(lab: list[str]) -> list[str]:
    accounting = STATE / "run" / "accounting"
    if not accounting.exists() or accounting.read_text().strip() != "1":
        pytest.skip("the lab runs without accounting; bring it up without --no-accounting")
    return lab


def scontrol(job_id: int) -> dict[str, str]:
    out = subprocess.run(
        ["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True, timeout=30
    ).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def sacct(job_id: int, *fields: str) -> list[list[str]]:
    """sacct's rows of a job and its steps."""
    out = subprocess.run(
        ["sacct", "-n", "-P", "-j", str(job_id), "-o", ",".join(fields)], capture_output=True, text=True, timeout=30
    ).stdout
    return [line.split("|") for line in out.splitlines() if line.strip()]


@pytest.mark.smoke
@pytest.mark.smoke_versions
def test_site_options_reach_slurm_and_the_job_runs(site: list[str]) -> None:
    """QOS (on a partition only that QOS may use), a constraint, exclusive nodes, memory and an
    escape-hatch sbatch argument: all in SLURM's view of the job, which runs to the end."""
    res, data = submit(
        "exit_code.py", "0", nodes=2,
        extra=(
            "--partition", "labqos", "--qos", "high", "--account", "rl", "--constraint", "rackA",
            "--exclusive", "--mem", "1000M", "--comment", "srl-site", "--sbatch-arg=--nice=5",
        ),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert data["exit_code"] == 0, data
    job = scontrol(data["job_id"])
    assert job["QOS"] == "high" and job["Account"] == "rl" and job["Partition"] == "labqos"
    assert job["Features"] == "rackA" and job["NodeList"] == "node[1,3]"  # the rackA nodes
    assert job["OverSubscribe"] == "NO" and job["MinMemoryNode"] == "1000M"
    assert job["Comment"] == "srl-site" and job["Nice"] == "5"  # a flag, and the escape hatch
    # SLURM's record, as `status` shows it once the job ended
    status = run_cli("status", str(data["job_id"]), "--json")
    record = json.loads(status.stdout.splitlines()[-1])["accounting"]
    assert record["state"] == "COMPLETED" and record["exit_code"] == 0, record
    assert re.fullmatch(r"(\d+-)?\d\d:\d\d:\d\d", record["elapsed"]) and record["elapsed"] != "00:00:00", record
    assert set(record["max_rss"]) <= {"node1", "node3"} and record["max_rss"], record
    human = run_cli("status", str(data["job_id"]))
    assert "SLURM accounting: COMPLETED, exit code 0, elapsed" in human.stdout, human.stdout


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        pytest.param(("--partition", "labqos"), "QOS", id="partition-needs-qos"),
        pytest.param(("--qos", "nosuchqos"), "qos", id="unknown-qos"),
        pytest.param(("--account", "nosuchaccount"), "account", id="unknown-account"),
        pytest.param(("--constraint", "rackZ"), "feature", id="unknown-feature"),
    ],
)
def test_what_the_site_refuses_is_refused_at_submit(site: list[str], extra: tuple[str, ...], reason: str) -> None:
    """sbatch's own reason, one line, exit 2; no job dir left behind."""
    name = f"refused-{os.getpid()}-" + "-".join(a.strip("-") for a in extra)
    res = run_cli("submit", SPEC, str(EXPERIMENTS / "exit_code.py"), "--nodes", "2", "--name", name, *extra)
    assert res.returncode == 2, res.stdout + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "sbatch refused the job" in res.stderr, res.stderr
    assert reason.lower() in res.stderr.lower(), res.stderr
    fileroot = Path(json.loads(Path(SPEC).read_text())["fileroot"])
    assert not list(fileroot.glob(f"*/{name}/*")), "a refused job left a job dir"


@pytest.mark.parametrize(
    ("extra", "spec_fields", "said"),
    [
        pytest.param(
            ("--partition", "labshort", "--time", "20"), {}, "--time 20: partition labshort allows at most", id="time"
        ),
        pytest.param(  # sbatch reads a time of zero as no limit of the job's own: over any MaxTime
            ("--partition", "labshort", "--time", "0"), {}, "--time 0 (no limit): partition labshort", id="no-time"
        ),
        pytest.param(("--cpus-per-node", "99"), {}, "--cpus-per-node 99: partition lab's largest node has", id="cpus"),
        pytest.param(("--mem", "9000M"), {}, "--mem 9000M: partition lab's largest node has 4000 MB", id="mem"),
        pytest.param(
            ("--mem-per-cpu", "3000M", "--cpus-per-node", "2"), {}, "need 6000 MB, partition lab's", id="mem-per-cpu"
        ),
        pytest.param((), {"python": "/nonexistent/bin/python3"}, "python /nonexistent/bin/python3 (the spec", id="py"),
        pytest.param(("--sbatch-arg=--comment=x",), {}, "slurm-rl has a flag for this; use --comment x", id="comment"),
        pytest.param(("--sbatch-arg=--output=/x",), {}, "would break the job as slurm-rl runs it", id="unsafe-flag"),
        pytest.param(
            ("--qos", "small", "--nodes", "2"), {}, "QOS small allows at most 1 per job (MaxTRESPerJob", id="qos-nodes"
        ),
        pytest.param(("--qos", "short", "--time", "20"), {}, "QOS short allows at most 00:10:00", id="qos-time"),
    ],
)
def test_what_the_site_would_refuse_or_strand_is_refused_before_the_queue(
    site: list[str], tmp_path: Path, extra: tuple[str, ...], spec_fields: dict, said: str
) -> None:
    """From the site's own numbers (sinfo) and paths the nodes share with the login node: one
    line, exit 2, no job submitted and no job dir."""
    name = f"early-{os.getpid()}-{len(extra)}-{len(spec_fields)}"
    spec = lab_spec(tmp_path, **spec_fields) if spec_fields else SPEC
    before = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, timeout=30).stdout
    res = run_cli("submit", str(spec), str(EXPERIMENTS / "exit_code.py"), "--nodes", "1", "--name", name, *extra)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stdout + res.stderr
    assert said in res.stderr, res.stderr
    fileroot = Path(json.loads(Path(SPEC).read_text())["fileroot"])
    assert not list(fileroot.glob(f"*/{name}/*")), "a refused job left a job dir"
    assert subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, timeout=30).stdout == before


def test_an_interpreter_missing_on_the_nodes_only_is_the_jobs_exit_reason(lab: list[str], tmp_path: Path) -> None:
    """A python the login node has and the nodes do not (here: in the login's /tmp, which is each
    lab node's own): the job fails at once and says which interpreter, where, and the fix."""
    python = tmp_path / "venv" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    res, data = submit("exit_code.py", "0", nodes=2, spec=lab_spec(tmp_path, python=str(python)), timeout=120)
    assert res.returncode == 127 and data["exit_code"] == 127, res.stderr
    reason = data["exit_reason"]
    assert f'python {python} (the spec\'s "python") does not exist on node' in reason, reason
    assert 'set "python" in the spec to an interpreter that every node has' in reason, reason


@pytest.mark.smoke
@pytest.mark.smoke_versions
def test_teardown_in_an_enforced_account_carries_it_and_leaves_nothing(site: list[str]) -> None:
    """A teardown of a job that ended without its nodes' cleanup (its node bootstraps killed with
    SIGKILL here, which they cannot catch, then cancelled; at a site: lost) cleans its nodes
    outside any allocation: as its own short job, in the job's account and QOS (a site enforcing
    them refuses it otherwise). (A running job is cleaned inside its allocation; a node whose
    bootstrap cleaned up at the job's end is left be.)"""
    data = start("hold.py", nodes=2, extra=("--account", "rl", "--qos", "high"))
    wait_ready(data)
    bootstraps = (
        "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null "
        f"| grep -qx SLURM_RL_JOB_ID={data['job_id']} "
        f"&& tr '\\0' ' ' < $p/cmdline | grep -q 'slurm_rl.job.node' && kill -9 ${{p#/proc/}}; done; true"
    )
    nodes = job_cluster(data)["nodes"]
    for node in nodes:  # the first one killed never cleans up; a later one may see the stop first
        subprocess.run([str(LAB), "exec", node, "--", "sh", "-c", bootstraps], check=True, timeout=30)
    subprocess.run(["scancel", str(data["job_id"])], check=True, timeout=30)
    wait_gone(data["job_id"])
    ended = [e["node"] for e in read_events(job_dir(data) / "events.jsonl") if e["event"] == "node_cleaned"]
    assert nodes[0] not in ended, ended  # nothing said that node is clean: teardown must look there
    res = run_cli("teardown", str(data["job_id"]), "--json", "--spec", SPEC)
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)["per_node"]) == 2
    assert_no_leftovers(site, data["job_id"])

    def cleanup_job() -> list[list[str]]:
        rows = sacct_all_since(data["job_id"])
        return [r for r in rows if r[1] == "slurm-rl-cleanup"]

    assert wait_for(cleanup_job, 30), "no cleanup job in SLURM's accounting"
    assert all(r[2] == "rl" and r[3] == "high" for r in cleanup_job()), cleanup_job()


def sacct_all_since(job_id: int) -> list[list[str]]:
    """Allocations (JobID, JobName, Account, QOS) of jobs submitted after ``job_id``'s."""
    out = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-S", "now-1hour", "-o", "JobID,JobName,Account,QOS"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    return [r for r in rows if r[0].split("+")[0].isdigit() and int(r[0].split("+")[0]) > job_id]
