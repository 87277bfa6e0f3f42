"""Two clusters side by side (issue 80): the lab and lab b (`slurm-lab --name b up`: its own
nodes, network, slurmctld, slurmdbd, config and job ids, the same users and accounts), both in
one clusters file, each reached from this machine through its own slurm.conf. A job submitted
to each runs on its own lab; a bare id finds the right one; `list` shows both, with the
cluster; with the lab full, `--cluster auto` goes to lab b and says why, and a GPU job goes to
the lab (b has none); `--cluster first` with both free runs one job and cancels the other at its
start gate (no step, no job dir, nothing on its nodes); with lab b down, `list` says so in one
line and still shows the lab's jobs. From a laptop namespace (no SLURM there, each cluster
reached through its own login node: lab b's is blogin): `submit --cluster a|b`, status and logs
by bare id, a pending job's reason in words, auto, the GPU job's choice, `list` (both labs, then
lab b down) and `first`. Lab b comes up for this module only, with the lab's runtimes (a user's Pyxis
and Apptainer jobs run there) and a login node of its own."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LAB, REPO, cli_argv, run_cli
from tests.lab.helpers import (
    EXPERIMENTS,
    SPEC_APPTAINER,
    SPEC_PYXIS,
    STATE,
    apptainer_missing,
    assert_no_leftovers,
    lab_spec,
    last_json,
    pyxis_missing,
    wait_for,
)
from tests.lab.laptop import Laptop

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]

B_NODES = ["bnode1", "bnode2"]
B_SPEC = REPO / "cluster_specs" / "lab-b.json"
B_CONF = json.loads(B_SPEC.read_text())["slurm_conf"]
B_STATE = Path("/var/lib/slurm-lab-b")


def lab_b_cmd(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LAB), "--name", "b", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def lab_b(lab: list[str]) -> Iterator[list[str]]:
    """Lab b, two nodes of two CPUs, on the SLURM the lab runs, with the lab's container runtimes
    (their config its own: the machine's stays the lab's) and, as the lab has one, a login node
    of its own (blogin); down again after the module."""
    version = (STATE / "run" / "slurm").read_text().strip()
    runtimes = [*(["--pyxis"] if not pyxis_missing() else []), *(["--apptainer"] if not apptainer_missing() else [])]
    if "--login" in (STATE / "run" / "up-args").read_text().split():
        runtimes.append("--login")  # its own login node, blogin
    t0 = time.monotonic()
    res = lab_b_cmd("up", "--nodes", "2", "--cpus", "2", "--slurm", version, *runtimes)
    assert res.returncode == 0, res.stderr[-3000:]
    print(f"lab b up in {time.monotonic() - t0:.1f} s")
    try:
        yield B_NODES
    finally:
        down = lab_b_cmd("down", timeout=300)
        assert down.returncode == 0, down.stderr[-2000:]


def job_of(res: subprocess.CompletedProcess[str]) -> dict:
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads([line for line in res.stdout.splitlines() if line.startswith("{")][-1])


def status_of(job_id: int, env: dict[str, str]) -> dict:
    res = run_cli("status", str(job_id), "--json", env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


@pytest.mark.as_lab_user
def test_lab_b_runs_a_user_s_pyxis_and_apptainer_jobs_beside_the_lab(lab_b: list[str], tmp_path: Path) -> None:
    """Lab b with Pyxis and Apptainer (`up --name b --pyxis --apptainer`): a user's job of each
    runs there in the image, on b's nodes, and leaves nothing; the lab's own enroot config, the
    machine's, is untouched (b's is a copy bound over it in b's nodes)."""
    runtimes = {"pyxis": SPEC_PYXIS, "apptainer": SPEC_APPTAINER}
    missing = {"pyxis": pyxis_missing(), "apptainer": apptainer_missing()}
    if any(missing.values()):
        pytest.skip("; ".join(f"{k}: {v}" for k, v in missing.items() if v))
    machine_enroot = Path("/usr/local/etc/enroot/enroot.conf.d/slurm-lab.conf").read_text()
    b = json.loads(B_SPEC.read_text())
    jobs = {}
    for name, spec in runtimes.items():
        fields = json.loads(Path(spec).read_text())
        fields.update({k: b[k] for k in ("cluster_name", "node_name_prefix", "node_type_from_node_name", "slurm_conf")})
        path = tmp_path / f"lab-b-{name}.json"
        path.write_text(json.dumps(fields))
        jobs[name] = subprocess.Popen(
            [*cli_argv("submit", str(path), str(EXPERIMENTS / "container_check.py"), "--nodes", "2",
                       "--cpus-per-node", "1", "--wait", "--json", "--", "2")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        )  # fmt: skip
    for name, proc in jobs.items():
        out, err = proc.communicate(timeout=300)
        job = job_of(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
        assert job["state"] == "COMPLETED", (name, err[-2000:])
        seen = last_json((Path(job["job_dir"]) / "logs" / "driver.log").read_text(), "nodes")
        assert sorted(n["host"] for n in seen["per_node"]) == B_NODES, (name, seen)
        assert {n["python"] for n in seen["per_node"]} == {"/opt/slurm-rl/bin/python"}, (name, seen)  # the image's
        assert_no_leftovers(lab_b, job["job_id"])
    assert Path("/usr/local/etc/enroot/enroot.conf.d/slurm-lab.conf").read_text() == machine_enroot


def test_two_labs_each_runs_its_jobs_a_bare_id_finds_them_and_auto_goes_where_it_starts(
    lab: list[str], lab_b: list[str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = {"SLURM_RL_CLUSTERS": str(tmp_path / "clusters.json")}
    spec_a = lab_spec(tmp_path, slurm_conf="/etc/slurm/slurm.conf")
    for name, spec in (("a", spec_a), ("b", B_SPEC)):
        assert run_cli("clusters", "add", name, str(spec), env=env).returncode == 0
    shown = run_cli("clusters", env=env, timeout=60)
    lines = dict(line.split(": ", 1) for line in shown.stdout.splitlines())
    assert lines["a"].startswith("SLURM ") and lines["b"].startswith("SLURM "), shown.stdout
    hello = str(REPO / "examples" / "hello.py")
    # from a laptop (no SLURM there), each cluster by its name, through its own login node: they
    # run beside the ones below, and are looked at by bare id once lab a is full
    laptop, exp = laptop_of_both(tmp_path, request)
    la = job_of(laptop.run("submit", "--cluster", "a", str(exp), "-N", "1", "--json", timeout=300))
    lb = job_of(laptop.run("submit", "--cluster", "b", str(exp), "-N", "2", "--json", timeout=300))
    assert la["job_id"] < 51_000_000 <= 55_000_000 <= lb["job_id"], (la, lb)
    assert la.get("cluster") == "a" and lb.get("cluster") == "b", (la, lb)
    ja = job_of(run_cli("submit", "--cluster", "a", hello, "-N", "1", "--wait", "--json", env=env, timeout=240))
    jb = job_of(run_cli("submit", "--cluster", "b", hello, "-N", "2", "--wait", "--json", env=env, timeout=240))
    assert ja["job_id"] < 51_000_000 <= 55_000_000 <= jb["job_id"], (ja["job_id"], jb["job_id"])
    assert ja["cluster"] == "a" and jb["cluster"] == "b", (ja, jb)  # --json names the cluster it was given
    # by their bare ids, each found on its own lab, its nodes its lab's
    sa, sb = status_of(ja["job_id"], env), status_of(jb["job_id"], env)
    assert sa["state"] == sb["state"] == "COMPLETED", (sa, sb)
    logs = run_cli("logs", str(jb["job_id"]), env=env)
    assert logs.returncode == 0 and {"bnode1", "bnode2"} <= set(logs.stdout.replace("\n", " ").split()), logs.stdout
    listed = run_cli("list", env=env).stdout.splitlines()
    rows = {line.split()[1]: line.split()[0] for line in listed[1:] if len(line.split()) > 1}
    assert rows.get(str(ja["job_id"])) == "a" and rows.get(str(jb["job_id"])) == "b", listed
    # the lab full (a job holding every node): auto goes to b, and says why
    # an hour's limit, so SLURM's estimate for a is about an hour away (not a year: no limit)
    every_node = ("--exclusive", "-N", str(len(lab)), "-p", "lab", "-t", "60", "-o", "/dev/null")
    hold = subprocess.run(
        ["sbatch", "--parsable", *every_node, "--wrap", "sleep 600"],
        capture_output=True, text=True, timeout=30, env={**os.environ, "SLURM_CONF": "/etc/slurm/slurm.conf"},
    )  # fmt: skip
    assert hold.returncode == 0, hold.stderr
    held = hold.stdout.strip().split(";")[0]
    try:
        assert wait_for(lambda: _squeue_state(held) == "RUNNING", 120), _squeue_state(held)
        # the laptop's two ran on their own labs, by bare id each from its own login node
        shown = {"out": ""}

        def completed(job: dict) -> bool:
            res = laptop.run("status", str(job["job_id"]), timeout=120)
            shown["out"] = res.stdout + res.stderr
            return "SLURM accounting: COMPLETED" in res.stdout

        for job, node in ((la, "node"), (lb, "bnode")):
            assert wait_for(lambda job=job: completed(job), 90, poll_s=2), shown["out"]
            ran_on = {w.rstrip(":,") for w in laptop.run("logs", str(job["job_id"]), timeout=120).stdout.split()}
            assert any(w.startswith(node) and w.removeprefix(node).isdigit() for w in ran_on), (job, ran_on)
        # a job for the full lab, from the laptop: pending, and why in words, with its place
        waiting = job_of(laptop.run("submit", "--cluster", "a", str(exp), "-N", "1", "--json", timeout=300))
        pending = {"waits_for": ""}

        def reason_given() -> bool:
            pending.update(json.loads(laptop.run("status", f"a:{waiting['job_id']}", "--json").stdout or "{}"))
            return pending["waits_for"] not in ("", "SLURM's scheduler")

        wait_for(reason_given, 60, poll_s=1)
        assert pending["state"] == "PENDING" and pending["waits_for"].endswith(("(Resources)", "(Priority)")), pending
        table = laptop.run("status", str(waiting["job_id"])).stdout  # its bare id: lab a's alone
        said = f"job {waiting['job_id']}: pending, waiting for "
        assert said in table and " ahead of it in partition " in table, table
        assert laptop.run("teardown", str(waiting["job_id"]), timeout=120).returncode == 0
        t0 = time.monotonic()
        res = run_cli("submit", "--cluster", "auto", hello, "-N", "1", "--wait", "--json", env=env, timeout=240)
        job = job_of(res)
        said = next(line for line in res.stderr.splitlines() if "--cluster auto:" in line)
        print(f"--cluster auto over two labs, the first full: {time.monotonic() - t0:.1f} s to its end; {said}")
        assert job["cluster"] == "b" and job["state"] == "COMPLETED", job
        assert said.startswith("slurm-rl: --cluster auto: b (cluster b: starts now; cluster a: starts in ~"), said
        # the same from a laptop (no SLURM there): each cluster asked through its login node
        t0 = time.monotonic()
        far = laptop.run("submit", "--cluster", "auto", str(exp), "-N", "1", "--wait", "--json", timeout=300)
        job = job_of(far)
        said = next(line for line in far.stderr.splitlines() if "--cluster auto:" in line)
        print(f"--cluster auto from a laptop, through the login node: {time.monotonic() - t0:.1f} s; {said}")
        assert said.startswith("slurm-rl: --cluster auto: b (cluster b: starts now; cluster a: starts in ~"), said
        assert job["state"] == "COMPLETED" and job["job_id"] >= 55_000_000, job
        if "blogin" in laptop.logins:  # b was asked on its own login node
            assert "Accepted publickey" in (B_STATE / "log" / "login-sshd.log").read_text()
        # by bare id from the laptop: each job's own cluster's login node answers (its SLURM's record)
        t0 = time.monotonic()
        shown = laptop.run("status", str(job["job_id"]), timeout=120)
        print(f"status by bare id from a laptop over two clusters: {time.monotonic() - t0:.1f} s")
        assert shown.returncode == 0 and "SLURM accounting: COMPLETED" in shown.stdout, shown.stdout + shown.stderr
        logs = laptop.run("logs", str(ja["job_id"]), timeout=120)
        assert logs.returncode == 0 and "node1" in logs.stdout.split(), logs.stdout + logs.stderr
        # list from the laptop: each cluster's jobs from its login node, with the cluster
        t0 = time.monotonic()
        mine = laptop.run("list", timeout=120)
        print(f"list from a laptop over two clusters, each through the login node: {time.monotonic() - t0:.1f} s")
        assert mine.returncode == 0, mine.stderr
        seen = {tuple(line.split()[:2]) for line in mine.stdout.splitlines()[1:]}
        assert mine.stdout.split()[0] == "cluster" and ("b", str(job["job_id"])) in seen, mine.stdout
        assert ("a", str(ja["job_id"])) in seen, mine.stdout
    finally:
        subprocess.run(["scancel", held], timeout=30, env={**os.environ, "SLURM_CONF": "/etc/slurm/slurm.conf"})
    assert_no_leftovers(lab_b, jb["job_id"])
    assert_no_leftovers(lab, ja["job_id"])
    # a GPU job: lab b has no GPUs, so it goes to the lab, and b's refusal says why
    gpu = run_cli("submit", "--cluster", "auto", hello, "-N", "1", "-p", "labgpu", "--gpus-per-node", "1",
                  "--dry-run", "--json", env=env, timeout=120)  # fmt: skip
    assert job_of(gpu)["cluster"] == "a", gpu.stderr
    assert "cluster b: cannot run it: " in gpu.stderr and "GPU" in gpu.stderr.split("cluster b: cannot run it: ")[1]
    # the same choice from the laptop
    gpu = laptop.run("submit", "--cluster", "auto", str(exp), "-N", "1", "-p", "labgpu", "--gpus-per-node", "1",
                     "--dry-run", "--json", timeout=120)  # fmt: skip
    assert job_of(gpu)["cluster"] == "a", gpu.stderr
    assert "cluster b: cannot run it: " in gpu.stderr and "GPU" in gpu.stderr.split("cluster b: cannot run it: ")[1]
    # --cluster first, both labs free: one job runs, the other is cancelled at its start gate
    t0 = time.monotonic()
    raced = run_cli("submit", "--cluster", "first", hello, "-N", "1", "--wait", "--json", env=env, timeout=240)
    kept = one_kept_the_other_gone(
        raced, lab, lab_b, {json.loads(Path(p).read_text())["fileroot"] for p in (spec_a, B_SPEC)}
    )
    print(f"--cluster first over two free labs: {time.monotonic() - t0:.1f} s to the kept job's end")
    assert f"{kept['loser']}:{kept['loser_id']}" in raced.stderr.split("--cluster first: cancelled ")[1].splitlines()[0]
    # the same race from the laptop: each lab raced through the login node
    t0 = time.monotonic()
    raced = laptop.run("submit", "--cluster", "first", str(exp), "-N", "1", "--wait", "--json", timeout=300)
    one_kept_the_other_gone(raced, lab, lab_b, {"/var/tmp/slurm-rl"})  # the laptop's specs' fileroot
    print(f"--cluster first from a laptop, through the login node: {time.monotonic() - t0:.1f} s to the end")
    # lab b down: list says it in one line and shows the lab's jobs within its own time
    down = lab_b_cmd("down", timeout=300)
    assert down.returncode == 0, down.stderr[-2000:]
    t0 = time.monotonic()
    res = run_cli("list", env=env, timeout=60)
    took = time.monotonic() - t0
    print(f"list over two clusters, one down: {took:.1f} s")
    assert res.returncode == 0, res.stderr
    assert any(line.split()[:2] == ["a", str(ja["job_id"])] for line in res.stdout.splitlines()), res.stdout
    assert [line for line in res.stderr.splitlines() if "cluster b" in line] == [
        next(line for line in res.stderr.splitlines() if "cluster b: does not answer (" in line)
    ], res.stderr
    assert took < 20, f"a silent cluster is bounded: {took:.1f} s"
    far = laptop.run("list", timeout=120)  # the same from the laptop, through the login node
    assert far.returncode == 0 and any(ln.split()[:1] == ["a"] for ln in far.stdout.splitlines()), far.stdout
    assert [ln for ln in far.stderr.splitlines() if "cluster b" in ln] == [
        next(ln for ln in far.stderr.splitlines() if ln.startswith("cluster b: does not answer"))
    ], far.stderr
    # the lab runs as before lab b came and went: its containers too (their config is the machine's)
    if not pyxis_missing():
        boxed = run_cli("submit", SPEC_PYXIS, hello, "-N", "1", "--wait", "--json", timeout=300)
        assert job_of(boxed)["state"] == "COMPLETED", boxed.stderr[-2000:]


def laptop_of_both(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Laptop, Path]:
    """A laptop with both labs in its clusters file, each reached through its own login node
    (lab b's is blogin where it has one), and the laptop's own copy of hello.py."""
    laptop = Laptop(tmp_path / "laptop")
    request.addfinalizer(laptop.close)
    b_login = lab_b_cmd("login-key", timeout=30)
    if b_login.returncode == 0:
        laptop.reach("blogin", Path(b_login.stdout.strip()))
    for name, fields in (("a", {}), ("b", json.loads(B_SPEC.read_text()))):
        host = "blogin" if name == "b" and "blogin" in laptop.logins else "login"
        added = laptop.run("clusters", "add", name, str(laptop.write_spec(f"{name}.json", login=host, **fields)),
                           "--login", host)  # fmt: skip
        assert added.returncode == 0, added.stderr
    exp = laptop.home / "hello.py"  # the laptop's own code: it goes along with the submit
    exp.write_text((REPO / "examples" / "hello.py").read_text())
    return laptop, exp


def one_kept_the_other_gone(
    raced: subprocess.CompletedProcess[str], lab: list[str], lab_b: list[str], roots: set[str]
) -> dict:
    """A --cluster first race over both labs: the kept job completed, and the other is CANCELLED
    with no step run, no job dir under ROOTS and nothing on its nodes; the kept job's JSON with
    the loser's cluster and id."""
    kept = job_of(raced)
    assert kept["state"] == "COMPLETED" and kept["cluster"] in ("a", "b"), raced.stderr
    sent = next(line for line in raced.stderr.splitlines() if "--cluster first: submitted " in line)
    ids = dict(label.split(":") for label in sent.split("submitted ")[1].split(";")[0].split(", "))
    assert sorted(ids) == ["a", "b"] and ids[kept["cluster"]] == str(kept["job_id"]), sent
    loser = "b" if kept["cluster"] == "a" else "a"
    env = {**os.environ, "SLURM_CONF": {"a": "/etc/slurm/slurm.conf", "b": B_CONF}[loser]}
    gone = subprocess.run(["sacct", "-n", "-X", "-j", ids[loser], "-o", "state"], capture_output=True, text=True,
                          timeout=30, env=env)  # fmt: skip
    assert gone.stdout.split() and gone.stdout.split()[0].startswith("CANCELLED"), gone.stdout
    steps = subprocess.run(["sacct", "-n", "-j", ids[loser], "-o", "jobid"], capture_output=True, text=True,
                           timeout=30, env=env)  # fmt: skip
    assert not [s for s in steps.stdout.split() if s.endswith(".0")], f"the cancelled one ran a step: {steps.stdout}"
    assert not [d for root in roots for d in Path(root).glob(f"*/*/{ids[loser]}")], "the cancelled job's dir is gone"
    assert_no_leftovers(lab_b if loser == "b" else lab, int(ids[loser]))
    return {**kept, "loser": loser, "loser_id": ids[loser]}


def _squeue_state(job_id: str) -> str:
    out = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=30,
        env={**os.environ, "SLURM_CONF": "/etc/slurm/slurm.conf"},
    )  # fmt: skip
    return out.stdout.strip()
