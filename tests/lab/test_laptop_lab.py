"""slurm-rl from a laptop, on the lab's login node (`slurm-lab up --login`): every command runs
where no SLURM command, munge socket or cluster fileroot exists (tests/lab/laptop.py), so each
result below went over ssh, through one ControlMaster connection for the whole module."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.lab.helpers import assert_no_leftovers, in_queue, job_cluster, wait_for
from tests.lab.laptop import Laptop, accepted_logins

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def laptop(lab: list[str], tmp_path_factory: pytest.TempPathFactory) -> Laptop:
    home = tmp_path_factory.mktemp("laptop-home")
    machine = Laptop(home)
    project = home / "project"  # the user's code: a git repository only the laptop has
    (project / "examples").mkdir(parents=True)
    (project / "examples" / "grpo.py").write_text((REPO / "examples" / "grpo.py").read_text())
    (project / "notes.txt").write_text("untracked: stays on the laptop\n")
    subprocess.run(["git", "-C", str(project), "init", "-q"], check=True)
    subprocess.run(["git", "-C", str(project), "add", "examples/grpo.py"], check=True)
    machine.logins_before = accepted_logins()  # type: ignore[attr-defined]
    yield machine
    machine.close()


def _json(res: subprocess.CompletedProcess[str]) -> dict:
    assert res.returncode == 0, res.stderr
    return json.loads([ln for ln in res.stdout.splitlines() if ln.startswith("{")][-1])


def _answers(relay: subprocess.Popen[str], path: str, key: str) -> dict:
    """The JSON that ``path`` answers on the URL ``relay`` printed first (127.0.0.1 here)."""
    assert relay.stdout is not None and relay.stderr is not None
    line = relay.stdout.readline()
    url = re.match(r"(http://127\.0\.0\.1:\d+)", line)
    assert url, line + (relay.stderr.read() if relay.poll() is not None else "")
    with urllib.request.urlopen(f"{url.group(1)}{path}", timeout=30) as answer:
        body = json.loads(answer.read())
    assert key in body, body
    return body


def _processes(needle: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if needle in ln]


def test_grpo_with_a_snapshot_waited_for_then_fetched_with_status_list_and_logs(
    laptop: Laptop, lab: list[str], tmp_path: Path
) -> None:
    spec, exp = str(laptop.spec), str(laptop.home / "project" / "examples" / "grpo.py")
    args = ("--steps", "3", "--prompts", "16", "--group-size", "4")
    done = _json(laptop.run("submit", spec, exp, "-N", "3", "--snapshot", "--wait", "--json", "--", *args, timeout=400))
    job = str(done["job_id"])
    assert done["state"] == "COMPLETED" and done["exit_code"] == 0, done
    job_dir = Path(done["job_dir"])  # the cluster's path (the laptop's fileroot is an empty tmpfs)
    status = _json(laptop.run("status", job, "--json"))
    assert (status["state"], status["phase"]) == ("COMPLETED", "job_end"), status
    listed = laptop.run("list")
    assert listed.returncode == 0 and job in listed.stdout, listed.stdout + listed.stderr
    logs = laptop.run("logs", job, "-f", timeout=60)
    assert logs.returncode == 0 and re.search(r"^step +2 ", logs.stdout, re.M), logs.stdout[-2000:] + logs.stderr
    assert f"job {job}: COMPLETED, exit code 0" in logs.stderr  # how it ended, on stderr
    fetched = laptop.run("fetch", job, "--to", str(tmp_path / "results"))
    assert fetched.returncode == 0, fetched.stderr
    got = tmp_path / "results"
    rows = [json.loads(ln) for ln in (got / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "step" in r] == [0, 1, 2]
    assert (got / "metrics.png").stat().st_size > 5000 and (got / "logs" / "driver.log").exists()
    assert not (got / "ray_auth_token").exists() and not (got / "secrets.env").exists()
    board = laptop.popen("dashboard", job, "--tensorboard")  # TensorBoard on the login node, relayed here
    logdir = f"--logdir {job_dir / 'tensorboard'}"
    try:
        assert _answers(board, "/data/environment", "data_location")
    finally:
        board.terminate()
        board.wait(timeout=30)
    assert wait_for(lambda: not _processes(logdir), 30), _processes(logdir)  # it went with the laptop
    # the job ran the snapshot of the laptop's repository: tracked files only
    code = subprocess.run(["ls", str(job_dir / "code")], capture_output=True, text=True).stdout.split()
    assert code == ["examples"], code
    assert_no_leftovers(lab, int(job))


def test_attach_dashboard_and_teardown_of_a_running_cluster(laptop: Laptop, lab: list[str]) -> None:
    started = _json(laptop.run("submit", str(laptop.spec), "-N", "2", "--dashboard", "--json", timeout=60))
    job = str(started["job_id"])
    try:
        ready = wait_for(lambda: _json(laptop.run("status", job, "--json"))["phase"] == "ready", 120, poll_s=1)
        assert ready, laptop.run("status", job).stdout
        # whichever two nodes SLURM gave it (other tests' jobs share the lab)
        cluster = job_cluster(_json(laptop.run("status", job, "--json")))
        head, other_node = cluster["head_node"], next(n for n in cluster["nodes"] if n != cluster["head_node"])
        where = laptop.run("attach", job, "--", "hostname")
        assert where.returncode == 0 and where.stdout.split()[-1] == head, where.stdout + where.stderr
        other = laptop.run("attach", job, "--node", other_node, "--", "hostname")
        assert other.returncode == 0 and other.stdout.split()[-1] == other_node, other.stdout + other.stderr
        refused = laptop.run("attach", job, "--node", "node9", "--", "true")
        _refused(refused, "has no node 'node9'", ", ".join(cluster["nodes"]))
        relay = laptop.popen("dashboard", job)
        try:
            assert _answers(relay, "/api/version", "ray_version")
        finally:
            relay.terminate()
            relay.wait(timeout=30)
    finally:
        down = laptop.run("teardown", job, "--json", timeout=120)
    report = _json(down)
    assert report["job_id"] in (int(job), job), report
    assert wait_for(lambda: not in_queue(int(job)), 60)
    assert_no_leftovers(lab, int(job))


def test_a_sweep_of_two(laptop: Laptop) -> None:
    point = str(REPO / "tests" / "lab" / "experiments" / "sweep_point.py")
    flags = ("-N", "1", "--cpus-per-node", "1", "--wait", "--json")
    out = _json(
        laptop.run("sweep", str(laptop.spec), point, *flags, "--", "--lr", "0.1,0.3", "--seed", "0", timeout=300)
    )
    assert [(t["state"], t["exit_code"]) for t in out["tasks"]] == [("COMPLETED", 0)] * 2, out
    summary = laptop.run("sweep-summary", str(out["array_id"]))
    assert summary.returncode == 0, summary.stderr


def _refused(res: subprocess.CompletedProcess[str], *needles: str) -> str:
    line = res.stderr.strip()
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert len(line.splitlines()) == 1, line
    for n in needles:
        assert n in line, line
    return line


def test_each_login_failure_is_one_line_and_exit_2_with_nothing_submitted(
    laptop: Laptop, request: pytest.FixtureRequest
) -> None:
    exp = laptop.home / "refused_probe.py"  # a name no other job has: "nothing submitted" is checkable
    exp.write_text((REPO / "examples" / "hello.py").read_text())
    _refused(laptop.run("status", "--login", "nosuch.invalid"), "nosuch.invalid", "unreachable")
    _refused(laptop.run("submit", str(laptop.spec), str(exp), "--login", "login-stranger"), "authentication failed")
    missing = laptop.write_spec("missing.json", login_python="/usr/bin/python3")
    _refused(laptop.run("submit", str(missing), str(exp)), "not installed", "pip install slurm-rl==")
    other = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="slurm-rl-old-"))  # seen by the login node
    other.chmod(0o755)  # and by the laptop's user there
    request.addfinalizer(lambda: shutil.rmtree(other, ignore_errors=True))
    (other / "slurm_rl").mkdir()
    (other / "slurm_rl" / "__init__.py").write_text('__version__ = "0.0.9"\n')  # another version there
    wrapper = other / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={other} exec /usr/bin/python3 "$@"\n')
    wrapper.chmod(0o755)
    old = laptop.write_spec("old.json", login_python=str(wrapper))
    _refused(laptop.run("submit", str(old), str(exp)), "0.0.9", "pip install slurm-rl==")
    locked = laptop.write_spec("locked.json", fileroot="/proc/slurm-rl")
    _refused(laptop.run("submit", str(locked), str(exp)), "/proc/slurm-rl", "not writable")
    queued = subprocess.run(["squeue", "-h", "-n", "refused_probe", "-o", "%i"], capture_output=True, text=True)
    assert queued.stdout == "" and not (Path(laptop.fileroot) / laptop.remote_user / "refused_probe").exists()


def test_the_whole_module_logged_in_once(laptop: Laptop) -> None:
    assert laptop.run("list").returncode == 0
    # one login for every command of this module (the stranger's refused key is no login)
    assert accepted_logins() - laptop.logins_before == 1  # type: ignore[attr-defined]
