"""Clusters at real scale and shape on the lab: hundreds of workers per node, ports nobody can
take from a job, jobs found by id from anywhere, bad input refused up front, secrets kept out
of every file SLURM or other users can read."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_rl.login.reading.job_wait import SLURM_POLL_MAX_S, SLURM_POLL_MIN_S
from tests.conftest import LAB, cli_argv, run_cli
from tests.lab.helpers import (
    CLIENT_DRIVER,
    EXPERIMENTS,
    SPEC,
    assert_no_leftovers,
    job_cluster,
    job_dir,
    last_json,
    start,
    submit,
    wait_for,
    wait_ready,
)

pytestmark = [pytest.mark.lab, pytest.mark.timeout(420)]


@pytest.mark.lab_shared
def test_a_job_whose_would_be_port_is_taken_still_starts(lab: list[str]) -> None:
    from slurm_rl.core.ports import preferred_gcs_port

    data = start("check_cluster.py", "1", nodes=1, extra=("--hold",))
    port = preferred_gcs_port(data["job_id"])
    hold = (  # until its stdin closes (killing `slurm-lab exec` alone would leave it on the node)
        f"import socket,sys; s=socket.socket(); s.bind(('', {port})); s.listen(); "
        "print(1, flush=True); sys.stdin.read()"
    )
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
    holders = [subprocess.Popen([str(LAB), "exec", n, "--", sys.executable, "-I", "-c", hold], **pipes) for n in lab]
    try:
        # each says once it holds the port
        assert [h.stdout.readline().strip() for h in holders] == ["1"] * len(lab)  # type: ignore[union-attr]
        subprocess.run(["scontrol", "release", str(data["job_id"])], check=True, timeout=30)
        assert wait_for(lambda: (job_dir(data) / "exit_code").exists(), 120), "the job never ended"
        assert (job_dir(data) / "exit_code").read_text().strip() == "0", (job_dir(data) / "exit_reason").read_text()
        cluster = job_cluster(data)
        assert cluster["ports"]["gcs"] != port
    finally:
        for h in holders:
            h.stdin.close()  # type: ignore[union-attr]
            h.wait(timeout=30)


def test_status_logs_teardown_by_job_id_from_anywhere(lab: list[str], tmp_path: Path) -> None:
    data = start("hold.py", nodes=2, extra=("--name", "by-id"))
    wait_ready(data)
    env = {k: v for k, v in os.environ.items() if k != "CLUSTER_SPEC_PATH"}
    env["COLUMNS"] = "80"

    def run(*a):
        return subprocess.run(
            cli_argv(*a),
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    st = run("status", str(data["job_id"]))
    assert st.returncode == 0, st.stderr
    assert "RUNNING" in st.stdout and ("driver_start" in st.stdout or "driver_connected" in st.stdout), st.stdout
    assert max(len(line) for line in st.stdout.splitlines()) <= 80, st.stdout
    assert str(data["job_id"]) in run("list").stdout.splitlines()[1]  # under the header: newest first, every spec
    assert run("logs", str(data["job_id"])).returncode == 0
    td = run("teardown", str(data["job_id"]))
    assert td.returncode == 0 and "cancelled" in td.stdout, td.stderr
    assert_no_leftovers(lab, data["job_id"])


# What slurmctld counts of a login node's commands (sdiag, by message type): queries, submission,
# release. Each SLURM command costs at most 3 (sinfo: partitions, nodes, federation).
LOGIN_RPCS = (
    *("REQUEST_JOB_INFO", "REQUEST_JOB_INFO_SINGLE", "REQUEST_JOB_USER_INFO", "REQUEST_PARTITION_INFO"),
    *("REQUEST_NODE_INFO", "REQUEST_NODE_INFO_SINGLE", "REQUEST_FED_INFO", "REQUEST_SUBMIT_BATCH_JOB"),
    *("REQUEST_UPDATE_JOB", "REQUEST_BUILD_INFO", "REQUEST_JOB_STEP_INFO", "REQUEST_RESERVATION_INFO"),
)
RPCS_PER_COMMAND = 3


def controller_rpcs() -> dict[str, int]:
    """slurmctld's own count of each RPC type since it started (`sdiag`)."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, timeout=30, check=True).stdout
    section = out.split("statistics by message type", 1)[1].split("statistics by user", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^\s*(\w+)\s+\(\s*\d+\)\s+count:(\d+)", section, re.M)}


def test_wait_is_gentle_on_slurmctld(lab: list[str]) -> None:
    """Alone on the lab (no lab_shared): the controller's counts are then this job's."""
    before, t0 = controller_rpcs(), time.monotonic()
    res, data = submit("exit_code.py", "0", nodes=1)
    elapsed, after = time.monotonic() - t0, controller_rpcs()
    assert res.returncode == 0, res.stderr
    got = {k: after.get(k, 0) - before.get(k, 0) for k in LOGIN_RPCS if after.get(k, 0) > before.get(k, 0)}
    # the old loop: 3 RPCs every ~0.6 s; now progress comes from the job dir, SLURM every 2..15 s
    budget = gentle_budget(elapsed)
    assert data["slurm_calls"] <= budget, (data["slurm_calls"], elapsed)
    # what the controller itself served: within the budget, and no more than slurm-rl says it asked
    assert sum(got.values()) <= RPCS_PER_COMMAND * min(budget, data["slurm_calls"]), (got, data["slurm_calls"], elapsed)
    assert got.get("REQUEST_SUBMIT_BATCH_JOB") == 1, got


def gentle_budget(elapsed: float) -> int:
    """SLURM commands a gentle `submit --wait` may run: sinfo, sbatch, release; a state query at
    the start, at 2 s, then at intervals doubling to 15 s, and one when the job dir says it ended;
    each query is squeue, plus scontrol once the job has left the queue."""
    asks, t, interval = 2, SLURM_POLL_MIN_S, SLURM_POLL_MIN_S
    while t <= elapsed:
        asks += 1
        interval = min(interval * 2, SLURM_POLL_MAX_S)
        t += interval
    return 3 + 2 * asks


@pytest.mark.parametrize(
    ("change", "args", "needle"),
    [
        ({}, ("--nodes", "99"), "partition 'lab' has 3 nodes, the job needs 99"),
        ({"fileroot": "/var/tmp/../tmp/slurm-rl"}, (), "fileroot"),
        ({"partition": "lab;rm -rf"}, (), "partition"),
        ({}, ("--account", "a b"), "--account"),
    ],
)
def test_bad_input_is_refused_before_submitting(
    lab: list[str], tmp_path: Path, change: dict, args: tuple, needle: str
) -> None:
    spec = {**json.loads(Path(SPEC).read_text()), **change}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    before = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout
    res = run_cli("submit", str(path), str(EXPERIMENTS / "exit_code.py"), *args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout == before


@pytest.mark.lab_shared
def test_secrets_reach_the_job_but_no_file(lab: list[str], tmp_path: Path) -> None:
    secret = "s3cr3t-" + os.urandom(6).hex()
    spec = json.loads(Path(SPEC).read_text())
    spec["env"] = {**spec["env"], "HF_TOKEN": secret, "PLAIN_SETTING": "visible"}
    path = tmp_path / "secret-spec.json"
    path.write_text(json.dumps(spec))
    res = run_cli(
        "submit",
        str(path),
        str(EXPERIMENTS / "env_check.py"),
        "--nodes",
        "2",
        "--wait",
        "--json",
        "--",
        "HF_TOKEN",
        hashlib.sha256(secret.encode()).hexdigest(),
        timeout=180,
    )
    assert res.returncode == 0, res.stderr
    jd = Path(json.loads(res.stdout.splitlines()[-1])["job_dir"])
    assert '"driver": true' in (jd / "logs" / "driver.log").read_text()
    assert stat.S_IMODE(jd.stat().st_mode) == 0o700
    assert stat.S_IMODE((jd / "secrets.env").stat().st_mode) == 0o600
    leaks = [
        p
        for p in jd.rglob("*")
        if p.is_file() and p.name not in ("secrets.env", "experiment.py") and secret in p.read_text(errors="replace")
    ]
    assert leaks == [], leaks
    assert "PLAIN_SETTING=visible" in (jd / "sbatch.sh").read_text()


@pytest.mark.lab_shared
def test_an_interactive_cluster_serves_attach_dashboard_and_ray_client(lab: list[str]) -> None:
    """An interactive cluster with --ray-client: `attach` on the head, the dashboard, and drivers
    off the job's nodes (here: the login node) through Ray Client, with slurm-rl's init_ray and
    with NeMo Gym's documented form (a plain ``ray.init("ray://HOST:PORT")``); a wrong token is
    refused; nothing of the proxy or its per-client servers outlives the job."""
    res = run_cli("submit", SPEC, "--nodes", "2", "--ray-client", "--json", timeout=60)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout.splitlines()[-1])
    jid = str(data["job_id"])
    try:
        cluster_file = job_dir(data) / "cluster.json"
        assert wait_for(lambda: cluster_file.exists() and json.loads(cluster_file.read_text()).get("ready_time"), 120)
        code = "from slurm_rl.distributed import init_ray; import ray; print('ATTACHED', init_ray(), len(ray.nodes()))"
        att = run_cli("attach", jid, "--", "python", "-c", code, timeout=120)
        assert "ATTACHED slurm_managed 2" in att.stdout, (att.stdout, att.stderr)
        dash = run_cli("attach", jid, "--dashboard")
        cluster = json.loads(cluster_file.read_text())
        assert dash.returncode == 0 and f"8265:{cluster['head_ip']}:{cluster['ports']['dashboard']}" in dash.stdout
        url = f"http://{cluster['head_ip']}:{cluster['ports']['dashboard']}"
        assert wait_for(lambda: _http_ok(url), 60), f"no dashboard at {url}"

        # Ray Client: the job's own free port, recorded; drivers here, not on the job's nodes
        assert cluster["client_address"] == f"ray://{cluster['head_ip']}:{cluster['ports']['ray_client_server']}"
        via_init = run_cli(
            "attach", jid, "--client", "--", sys.executable, "-c", CLIENT_DRIVER, "init_ray", timeout=120
        )
        assert via_init.returncode == 0, via_init.stderr[-3000:]
        seen = last_json(via_init.stdout, "client")
        assert seen["client"] == "slurm_managed" and seen["nodes"] == 2 and seen["here"] not in lab, seen
        assert seen["hosts"] == sorted(cluster["nodes"]), seen  # a task on each node of the job
        exports = run_cli("attach", jid, "--client")  # `eval "$(slurm-rl attach J --client)"`
        env = dict(line.removeprefix("export ").split("=", 1) for line in exports.stdout.splitlines())
        assert env["RAY_ADDRESS"] == cluster["client_address"] and env["RAY_AUTH_MODE"] == "token", exports.stdout
        plain = subprocess.run(
            [sys.executable, "-c", CLIENT_DRIVER, "plain"], env={**os.environ, **env},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert plain.returncode == 0, plain.stderr[-3000:]
        seen = last_json(plain.stdout, "client")
        assert seen["nodes"] == 2 and seen["settings"] == ["from-here"], seen  # the client's runtime_env applied
        wrong = {
            **os.environ,
            **env,
            "RAY_AUTH_TOKEN_PATH": str(_wrong_token(job_dir(data))),
            # Ray Client retries a refused call as "not ready yet": 3 tries of 1 s, not 5-30 s each
            "RAY_CLIENT_INITIAL_CONNECTION_TIMEOUT_S": "1",
            "RAY_CLIENT_MAX_CONNECTION_TIMEOUT_S": "1",
        }
        refused = subprocess.run(
            [sys.executable, "-c", CLIENT_DRIVER, "plain"], env=wrong, capture_output=True, text=True, timeout=120
        )
        assert refused.returncode != 0 and "from-here" not in refused.stdout, refused.stdout
        assert "ConnectionError" in refused.stderr, refused.stderr[-2000:]
    finally:
        td = run_cli("teardown", jid)
    assert td.returncode == 0, td.stderr
    assert_no_leftovers(lab, data["job_id"])


def _wrong_token(where: Path) -> Path:
    path = where / "not_the_token"
    path.write_text("0" * 64 + "\n")
    return path


def _http_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.mark.lab_shared
def test_ctrl_c_on_wait_leaves_the_job_running_and_says_how_to_stop_it(lab: list[str]) -> None:
    import signal

    proc = subprocess.Popen(
        cli_argv(
            "submit",
            SPEC,
            str(EXPERIMENTS / "hold.py"),
            "--nodes",
            "1",
            "--wait",
            "--name",
            "ctrl-c",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as from a terminal: a shell running pytest in the background (`.ci/run &`) makes its
        # children ignore SIGINT, and a process started ignoring it never sees Ctrl-C
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    first = proc.stdout.readline()  # "Submitted job N (1 node)"
    job_id = int(first.split()[2])
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert f"job {job_id}; it keeps running" in err and f"slurm-rl teardown {job_id}" in err, err
    assert subprocess.run(
        ["squeue", "-h", "-j", str(job_id), "-o", "%T"], capture_output=True, text=True
    ).stdout.strip()
    assert run_cli("teardown", str(job_id)).returncode == 0
    assert_no_leftovers(lab, job_id)
