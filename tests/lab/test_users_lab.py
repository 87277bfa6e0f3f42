"""Ordinary users, several at once: a job of an ordinary user runs as that user on every node,
a second user's jobs on the same nodes end in every way without touching it, and that second
user, trying as an attacker would, reaches nothing of it. Root only looks (the administrator's
view of the nodes) and reads the job's files to judge."""

from __future__ import annotations

import getpass
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LAB, REPO, run_cli
from tests.lab.helpers import (
    EXPERIMENTS,
    SPEC,
    SPEC_APPTAINER,
    SPEC_PYXIS,
    apptainer_missing,
    assert_no_leftovers,
    in_queue,
    job_cluster,
    job_leftovers,
    pyxis_missing,
    wait_for,
    wait_gone,
    wait_ready,
)
from tests.lab.laptop import login_key
from tests.lab.users import (
    OTHER,
    USER,
    as_user,
    files_not_owned_by,
    home,
    job_process_owners,
    release,
    run_as,
    start_as,
    uid,
)

ONE_CPU = ("--cpus-per-node", "1")  # two users' jobs side by side on the lab's 4-CPU nodes
EXPOSED = ("--dashboard", "--ray-client")  # every port a job can open, for the neighbour to try


@pytest.fixture(scope="module")
def held(lab: list[str]) -> Iterator[dict]:
    """A 3-node job of USER that holds one actor per node until released, under umask 000 (its
    secrets must be 0600 whatever the umask); at the end it is released and must complete."""
    data = start_as(USER, "hold.py", "ok", extra=(*ONE_CPU, *EXPOSED), umask="000")
    data["actors"] = wait_ready(data)
    yield data
    release(data, USER)
    wait_gone(data["job_id"], 120)
    res = run_as(USER, "status", str(data["job_id"]), "--json")
    assert json.loads(res.stdout)["state"] == "COMPLETED", res.stdout
    assert_no_leftovers(lab, data["job_id"])


def test_a_users_job_runs_as_that_user_on_every_node(held: dict, lab: list[str]) -> None:
    """No process of the job runs as root on any node (slurmd and slurmstepd are SLURM's), and
    nothing the job wrote (its job dir, its node-local dirs, the user's caches) is root's."""
    job_id, job_dir = held["job_id"], Path(held["job_dir"])
    for node in lab:
        owners = job_process_owners(node, job_id)
        assert owners, f"no process of job {job_id} found on {node}"
        as_root = [cmd for who, cmd in owners if who == 0 and "slurmstepd" not in cmd]
        assert not as_root, f"{node}: processes of job {job_id} run as root: {as_root}"
        assert {who for who, _ in owners} == {uid(USER)}, owners
        assert not files_not_owned_by(node, [f"/tmp/srl-{job_id}"], USER)
    stray = [str(p) for p in job_dir.rglob("*") if p.lstat().st_uid != uid(USER)]
    assert not stray, f"files in the job dir not {USER}'s: {stray}"
    assert not [str(p) for p in Path(home(USER)).rglob("*") if p.lstat().st_uid != uid(USER)]
    # secrets and private dirs whatever the umask (the job was submitted under umask 000)
    assert job_dir.stat().st_mode & 0o777 == 0o700
    assert job_dir.parent.parent.stat().st_mode & 0o777 == 0o700  # <fileroot>/<user>
    assert (job_dir / "ray_auth_token").stat().st_mode & 0o777 == 0o600
    for node in lab:
        assert (
            "700"
            in subprocess.run(
                [str(LAB), "exec", node, "--", "stat", "-c", "%a", f"/tmp/srl-{job_id}"], capture_output=True, text=True
            ).stdout
        )


def probe_as_neighbour(held: dict, where: list[str]) -> dict:
    """tests/lab/experiments/neighbour_probe.py as OTHER, run through ``where`` (a node's exec
    or an ssh to the login node); the job's facts go on stdin."""
    job_dir = Path(held["job_dir"])
    cluster = job_cluster(held)
    facts = {
        "job_dir": str(job_dir),
        "token": (job_dir / "ray_auth_token").read_text().strip(),
        "head_ip": cluster["head_ip"],
        "ports": cluster["ports"],
        "temp_dir": cluster["temp_dir"],
    }
    argv = [*where, sys.executable, str(EXPERIMENTS / "neighbour_probe.py")]
    res = subprocess.run(argv, input=json.dumps(facts), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def assert_refused(found: dict, where: str) -> None:
    controls = {k: v for k, v in found.items() if "(control)" in k}
    assert all(v.startswith("OPEN") for v in controls.values()), f"{where}: the control calls failed: {controls}"
    open_ = {k: v for k, v in found.items() if isinstance(v, str) and v.startswith("OPEN") and k not in controls}
    assert not open_, f"{where}: {OTHER} reached {open_}"
    tried = ("token file", "proc", "gcs", "raylet", "dashboard api/jobs/", "dashboard job submission", "ray client")
    for attempt in tried:
        assert attempt in found, f"{where}: {attempt} was not tried: {found}"
    assert found["gcs"] == found["raylet"] == "refused: UNAUTHENTICATED", found


def test_a_neighbour_reaches_nothing_of_the_job(held: dict, lab: list[str]) -> None:
    """As OTHER on the head's node and on the login node: the token file, the job dir, the token
    in /proc, the GCS, the raylet, the dashboard (its API and its job submission), the object
    store's, raylet's and fork server's sockets: each refused; every job command of OTHER's on
    the job: exit 2, one line, nothing done."""
    head = job_cluster(held)["head_node"]
    node = [str(LAB), "exec", head, "--", "runuser", "-u", OTHER, "--"]
    assert_refused(probe_as_neighbour(held, node), head)
    key = login_key()  # the login node is up
    assert key.exists()
    ssh = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    login = ["runuser", "-u", OTHER, "--", *ssh, "-i", f"{home(OTHER)}/.ssh/id_ed25519", f"{OTHER}@login"]
    assert_refused(probe_as_neighbour(held, login), "login")
    job = str(held["job_id"])
    commands = {
        "attach": ["attach", job, "--", "true"],
        "teardown": ["teardown", job],
        "stacks": ["stacks", job],
        "logs": ["logs", job],
        "fetch": ["fetch", job, "--to", f"/tmp/fetched-{job}"],
        "grow": ["grow", job, "--nodes", "1"],
        "dashboard": ["dashboard", job],
        "status": ["status", job],
    }
    for name, args in commands.items():
        res = run_as(OTHER, *args)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1 and USER in lines[0], f"{name}: {res.returncode} {res.stderr}"
    assert in_queue(held["job_id"])
    assert len(held["actors"]) == 3


def test_another_users_jobs_end_beside_it_without_touching_it(held: dict, lab: list[str]) -> None:
    """OTHER's one-node jobs on the same nodes end by a driver crash, scancel, teardown and the
    time limit; each leaves nothing, and USER's job keeps every process it had."""
    before = {n: sorted(job_process_owners(n, held["job_id"])) for n in lab}
    jobs = {
        end: start_as(OTHER, "hold.py", mode, nodes=1, extra=(*ONE_CPU, *more))
        for end, mode, more in [
            ("crash", "raise", ()),
            ("scancel", "ok", ()),
            ("teardown", "ok", ()),
            ("time limit", "ok", ("--time", "1")),
        ]
    }
    for data in jobs.values():
        wait_ready(data)
    release(jobs["crash"], OTHER)
    subprocess.run(as_user(OTHER, ["scancel", str(jobs["scancel"]["job_id"])]), check=True, timeout=30)
    down = run_as(OTHER, "teardown", str(jobs["teardown"]["job_id"]), "--json")
    assert down.returncode == 0, down.stderr
    assert "ermission" not in down.stdout + down.stderr, down.stdout + down.stderr
    for end, data in jobs.items():
        wait_gone(data["job_id"], 150 if end == "time limit" else 60)
        assert_no_leftovers(lab, data["job_id"], within_s=30)
    states = {end: json.loads(run_as(OTHER, "status", str(d["job_id"]), "--json").stdout) for end, d in jobs.items()}
    ended = {end: s["state"] for end, s in states.items()}
    expected = {"crash": "FAILED", "scancel": "CANCELLED", "teardown": "CANCELLED", "time limit": "TIMEOUT"}
    assert ended == expected, states
    after = {n: sorted(job_process_owners(n, held["job_id"])) for n in lab}
    assert after == before, f"{USER}'s job changed while {OTHER}'s jobs ended: {before} -> {after}"
    assert wait_for(lambda: in_queue(held["job_id"]), 5)


def test_a_fileroot_dir_somebody_else_made_is_refused(lab: list[str]) -> None:
    """A user the site just added (`slurm-lab user add`, twice: the second is a no-op) submits
    with the lab's spec unchanged; a `<fileroot>/<name>` another user made first is refused,
    exit 2, one line naming its owner, nothing submitted."""
    name = f"srl-new{uid(OTHER)}"
    for _ in range(2):
        added = subprocess.run([str(LAB), "user", "add", name], capture_output=True, text=True, timeout=120)
        assert added.returncode == 0, added.stderr
    planted = Path("/var/tmp/slurm-rl") / name
    subprocess.run(["rm", "-rf", str(planted)], check=True)
    subprocess.run(as_user(OTHER, ["mkdir", "-m", "0777", str(planted)]), check=True, timeout=30)
    try:
        res = run_as(
            name,
            "submit",
            str(EXPERIMENTS.parent.parent.parent / "cluster_specs" / "lab.json"),
            str(EXPERIMENTS / "hold.py"),
            "--nodes",
            "1",
            "--json",
        )
        assert res.returncode == 2 and OTHER in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    finally:
        subprocess.run(["rm", "-rf", str(planted)], check=True)
    res = run_as(
        name,
        "submit",
        str(EXPERIMENTS.parent.parent.parent / "cluster_specs" / "lab.json"),
        str(EXPERIMENTS.parent.parent.parent / "examples" / "hello.py"),
        "--nodes",
        "2",
        "--wait",
        "--json",
        timeout=180,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[-1])["exit_code"] == 0
    assert planted.stat().st_uid == uid(name)


FUSE = Path("/dev/fuse")  # the machine's: every lab node has the host's /dev


def probe_jobs() -> list[str]:
    """The ids of USER's `doctor --probe` jobs, as SLURM's accounting has them."""
    sacct = ["sacct", "-n", "-X", "-P", f"--user={USER}", "--name=slurm-rl-doctor", "--format=JobID"]
    return subprocess.run(sacct, capture_output=True, text=True, timeout=30).stdout.split()


def test_the_doctor_names_what_an_unprivileged_user_lacks(pyxis_lab: list[str]) -> None:
    """`doctor --probe` as USER on the Pyxis and Apptainer specs: the probe job runs as the user,
    every check passes but the one thing these machines lack for an unprivileged Apptainer
    (/dev/fuse is root's: ../shared/LAB-FACTS.md), which is one warning naming what the site
    changes; with /dev/fuse opened as that line says (for this test alone, under the lab's lock)
    it passes too. (User namespaces cannot be turned off here, not even by root: the machine's
    sysctl is read-only to the lab, so their failing line is proven by the unit tests only.)"""
    why = pyxis_missing() or apptainer_missing()
    assert not why, why  # CI's lab has both (a missing one fails `up` there)
    checks = {}
    earlier = set(probe_jobs())
    for spec in (SPEC_PYXIS, SPEC_APPTAINER):
        res = run_as(USER, "doctor", spec, "--probe", "--json", timeout=240)
        checks[spec] = {c["name"]: c for c in map(json.loads, res.stdout.splitlines())}
        assert res.returncode == 0, (spec, res.stdout, res.stderr)
    pyxis, apptainer = checks[SPEC_PYXIS], checks[SPEC_APPTAINER]
    assert {c["status"] for c in pyxis.values()} == {"ok"}, pyxis
    assert pyxis["user namespaces"]["found"].startswith(f"uid {uid(USER)} may create one"), pyxis
    assert "writable by uid" in pyxis["enroot paths"]["found"], pyxis
    assert pyxis["python and ray"]["found"].startswith("Python 3.11"), pyxis  # the probe ran, in the image
    assert apptainer["apptainer"]["found"].endswith("starts containers unprivileged, in a user namespace"), apptainer
    warned = {k: c for k, c in apptainer.items() if c["status"] != "ok"}
    assert list(warned) == ["fuse"] and warned["fuse"]["status"] == "warn", apptainer
    assert f"/dev/fuse is not open to uid {uid(USER)}" in warned["fuse"]["found"], warned
    assert "/dev/fuse mode 0666" in warned["fuse"]["fix"], warned
    assert apptainer["python and ray"]["found"].startswith("Python 3.11"), apptainer  # extracted, then run
    probes = wait_for(lambda: set(probe_jobs()) - earlier, 30)
    assert probes, "sacct shows no probe job of the user"
    left = {jid: where for jid in probes if (where := job_leftovers(pyxis_lab, int(jid)))}
    assert not left, left  # the extracted image went with its probe job
    before = FUSE.stat().st_mode & 0o777
    try:
        FUSE.chmod(0o666)
        res = run_as(USER, "doctor", SPEC_APPTAINER, "--probe", "--json", timeout=240)
    finally:
        FUSE.chmod(before)
    after = {c["name"]: c for c in map(json.loads, res.stdout.splitlines())}
    assert res.returncode == 0 and {c["status"] for c in after.values()} == {"ok"}, after


def test_the_readme_runs_the_lab_tests_as_an_ordinary_user(lab: list[str]) -> None:
    """The README's test command names an ordinary user for every lab test's slurm-rl commands
    (SLURM_RL_TEST_USER); where that is set (CI runs the command), a lab test's `submit` is that
    user's job: SLURM's accounting and the job dir say so, and the user is not root (uid >= 1000)."""
    command = next(
        ln for ln in (REPO / "README.md").read_text().splitlines() if ln.startswith("    tests/lab/slurm-lab up")
    )
    named = re.search(r"export SLURM_RL_TEST_USER=(\S+) ", command)
    suite_user = os.environ.get("SLURM_RL_TEST_USER")
    if os.environ.get("CI"):  # CI runs the README's command: its lab tests run as the user it names
        assert suite_user == (named.group(1) if named else None), command
    who = suite_user or getpass.getuser()  # run_cli's user in this test (tests/lab/conftest.py's lab_user)
    res = run_cli("submit", SPEC, str(REPO / "examples" / "hello.py"), "--nodes", "1", "--wait", "--json", timeout=180)
    assert res.returncode == 0, res.stderr
    done = json.loads(res.stdout.splitlines()[-1])
    assert Path(done["job_dir"]).owner() == who
    sacct = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", str(done["job_id"]), "-o", "User"], capture_output=True, text=True
    )
    assert sacct.stdout.split() == [who], sacct.stdout + sacct.stderr
    if suite_user:
        assert uid(suite_user) >= 1000
