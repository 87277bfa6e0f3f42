"""A job of parts on the GPU lab (issue 57): NeMo RL's non-colocated shape in one heterogeneous
job. A trainer and a rollout part (their own GPU nodes, a worker group placed on each), a judge
pool (two instances on the CPU partition's node, one URL that the driver's {judge.url} becomes)
and a code sandbox beside every rollout node. One judge instance is killed midway: it is started
again and no call fails. Then a job whose required service keeps failing ends FAILED, naming
the service, its node and its last lines. Every end leaves nothing on any node."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import LAB, REPO, run_cli
from tests.lab.helpers import EXPERIMENTS, SPEC_PYXIS, assert_no_leftovers, job_dir, wait_for, wait_gone

pytestmark = [pytest.mark.lab, pytest.mark.timeout(420)]
SPEC_GPU = str(REPO / "cluster_specs" / "lab-gpu.json")
PARTS = EXPERIMENTS / "parts"
SANDBOX_IMAGE = Path("/var/cache/slurm-lab/images/sandbox.sqsh")  # `slurm-lab image` builds it


def gpu_lab(lab: list[str]) -> list[str]:
    out = subprocess.run(["sinfo", "-h", "-p", "labgpu", "-o", "%G"], capture_output=True, text=True, timeout=10)
    if "gpu" not in out.stdout:
        pytest.skip("the lab has no GPUs (`slurm-lab up --gpus 4`)")
    return lab


def submit_parts(parts_yaml: Path, *args: str, spec: str = SPEC_GPU) -> dict:
    res = run_cli(
        "submit", spec, str(PARTS / "driver.py"), "--parts", str(parts_yaml), "--json", "--", *args,
        cwd=PARTS, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def logs_of(jd: Path) -> str:
    return "\n".join(
        f"== {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted((jd / "logs").glob("*.log"))
    )


def status(job: dict) -> dict:
    return json.loads(run_cli("status", str(job["job_id"]), "--json").stdout.splitlines()[-1])


def test_trainer_rollout_judges_and_sandboxes_in_one_job_in_containers(pyxis_lab: list[str]) -> None:
    nodes = gpu_lab(pyxis_lab)
    job = submit_parts(PARTS / "parts.yaml", "{judge.url}", "--kill-judge", spec=SPEC_PYXIS)
    jd = job_dir(job)
    try:
        asked = wait_for(lambda: (jd / "kill_judge_now").exists() or (jd / "exit_code").exists(), 240)
        assert asked and (jd / "kill_judge_now").exists(), (status(job), logs_of(jd))
        table = run_cli("status", str(job["job_id"])).stdout  # the table's lines for a job of parts
        jid = job["job_id"]
        assert f"job {jid}: part trainer: " in table and f"job {jid}: part rollout: " in table, table
        assert f"job {jid}: service judge: ready, 2/2 ready, http://" in table and ", on node1" in table, table
        # into each part's node, whichever heterogeneous component holds it (a service's node runs no Ray)
        for part, where in (("judge", "node1"), ("rollout", "node")):
            went = run_cli("attach", str(jid), "--part", part, "--", "hostname", timeout=60)
            assert went.returncode == 0 and went.stdout.strip().startswith(where), (part, went.stdout, went.stderr)
        victim = json.loads((jd / "kill_judge_now").read_text())
        subprocess.run(
            [str(LAB), "exec", victim["node"], "--", "kill", "-9", str(victim["pid"])], check=True, timeout=30
        )
        (jd / "judge_killed").touch()
        wait_gone(job["job_id"], 240)
        said = status(job)
        driver_log = (jd / "logs" / "driver.log").read_text()
        assert (said["state"], said["exit_code"]) == ("COMPLETED", 0), (said, driver_log[-3000:])
        out = json.loads((jd / "parts.json").read_text())
        workers = out["workers"]
        trainer = {w["host"] for w in workers["trainer"]}
        rollout = {w["host"] for w in workers["rollout"]}
        assert len(trainer) == 1 and len(rollout) == 1 and trainer != rollout, workers  # each part its own node
        assert trainer | rollout == {"node2", "node3"}  # labgpu's nodes
        assert all(len(w["gpus"].split(",")) == 1 for w in workers["trainer"] + workers["rollout"]), workers
        # every rollout worker ran code in its own node's sandbox
        assert out["sandbox"] == [f"{next(iter(rollout))}|42"] * 2, out["sandbox"]
        # isolated: what hostile code reached of the job from the sandbox (an image of its own,
        # without slurm-rl) and from the prober (the job's image), the driver's PROBE in each
        token = (jd / "ray_auth_token").read_text().strip()
        probes = out["probes"]
        assert set(probes) == {"sandbox", "prober"} and all(isinstance(p, dict) for p in probes.values()), probes
        assert (probes["sandbox"]["slurm_rl_in_image"], probes["prober"]["slurm_rl_in_image"]) == (False, True)
        for name, probe in probes.items():
            node = next(iter(rollout if name == "sandbox" else trainer))
            assert not [k for k in probe["env"] if k.startswith("RAY_")], (name, sorted(probe["env"]))
            assert not any(token in v for v in probe["env"].values()), name  # no token in its environment
            assert probe["procs"] and all("sandbox.py" in c for c in probe["procs"].values()), (name, probe["procs"])
            assert probe["environ_has_ray"] == [], name  # no other process's /proc/PID/environ
            home = jd / "services" / name / f"{node}-0.d"
            assert (probe["token"], probe["tokens_found"]) == ("FileNotFoundError", []), (name, probe)
            # of the job dir it sees its own dir and the job's copy of the code (read-only), nothing else
            kept = (str(home), str(jd / "code"))
            seen = probe["job_dir"]
            assert all(any(k.startswith(p.rstrip("/")) or p.startswith(k) for k in kept) for p in seen), (name, seen)
            assert str(jd / "code" / "sandbox.py") in seen and str(jd / "manifest.json") not in seen, (name, seen)
            assert probe["ray_sockets"] == [], (name, probe["ray_sockets"])  # no Ray session dir on the node
            assert "JOINED" not in probe["gcs"][1], (name, probe["gcs"])
            assert not isinstance(probe.get("dashboard"), int) or probe["dashboard"] >= 400, probe["dashboard"]
            assert (home / "mine.txt").read_text() == "written\n"  # its own dir: the one place it writes
        # the prober has Ray's client: the job's GCS refuses it (Ray's token auth)
        assert probes["prober"]["gcs"][0] != 0 and "InvalidAuthToken" in probes["prober"]["gcs"][1], probes["prober"]
        started = [e for e in read_events(jd / "events.jsonl") if e["event"] == "service_start"]
        assert {e.get("image") for e in started if e["service"] == "sandbox"} == {str(SANDBOX_IMAGE)}, started
        # the judge pool: both instances answered through the one URL, the {judge.url} placeholder
        assert out["judge_url_arg"] == out["services"]["judge"]["url"] and out["judge_url_arg"].startswith("http://")
        first = out["answers"][:8]
        assert len({a["pid"] for a in first}) == 2 and {a["node"] for a in first} == {"node1"}, first
        # killed: started again (an event), and the calls went on without one failing
        restarts = [e for e in read_events(jd / "events.jsonl") if e["event"] == "service_exit"]
        assert [(e["service"], e["restart"]) for e in restarts] == [("judge", True)], restarts
        assert {a["pid"] for a in out["answers"][8:]} - {a["pid"] for a in first}, "no restarted instance answered"
        assert out["services"]["judge"] == {"ready": 2, "total": 2, "url": out["judge_url_arg"]}
        assert out["services"]["sandbox"]["ready"] == 1
    finally:
        run_cli("teardown", str(job["job_id"]), timeout=120)
    assert_no_leftovers(nodes, job["job_id"], within_s=20)


def test_a_required_service_that_keeps_failing_fails_the_job_naming_it(lab: list[str], tmp_path: Path) -> None:
    nodes = gpu_lab(lab)
    parts = tmp_path / "failing.yaml"
    parts.write_text(
        "trainer: {nodes: 1, partition: labgpu}\n"
        "judge: {nodes: 1, partition: labcpu, service: 'python3 judge.py --fail --port {port}', restarts: 1}\n"
    )
    job = submit_parts(parts, "{judge.url}")
    wait_gone(job["job_id"], 240)
    said = status(job)
    reason = said["exit_reason"]
    assert said["state"] == "FAILED" and said["exit_code"] == 1, said
    assert "service judge failed on node1: instance 0 exited 3 after 1 restart(s)" in reason, reason
    assert "judge: failing on purpose" in reason, reason  # its last lines
    events = [e["event"] for e in read_events(job_dir(job) / "events.jsonl")]
    assert "driver_start" not in events  # the driver waits for the required services
    assert_no_leftovers(nodes, job["job_id"], within_s=20)


SMALL = (
    "trainer: {nodes: 1, partition: labgpu}\n"
    "web: {nodes: 1, partition: labcpu, service: 'python3 -m http.server --bind 0.0.0.0 {port}', ready: 'http:/'}\n"
)


@pytest.mark.lab_shared  # its own jobs only (no lab-tail test asks for GPUs or labgpu's nodes)
def test_a_job_of_parts_is_requeued_whole_and_chained(lab: list[str], tmp_path: Path) -> None:
    """--requeue and --chain with parts: each attempt, each job of the chain, is the whole
    heterogeneous job again (its service up again before the driver)."""
    nodes = gpu_lab(lab)
    parts = tmp_path / "small.yaml"
    parts.write_text(SMALL)
    res = run_cli(
        "submit", SPEC_GPU, str(EXPERIMENTS / "flaky.py"), "--parts", str(parts), "--requeue", "1", "--wait",
        "--json", timeout=300,
    )  # fmt: skip
    flaky = json.loads(res.stdout.splitlines()[-1])
    assert res.returncode == 0 and flaky["state"] == "COMPLETED", (res.stdout[-1500:], res.stderr[-1500:])
    events = read_events(job_dir(flaky) / "events.jsonl")
    ready = [e["attempt"] for e in events if e["event"] == "services_ready"]
    assert ready == [0, 1] and any(e["event"] == "requeue" for e in events), [e["event"] for e in events]

    res = run_cli(
        "submit", SPEC_GPU, str(EXPERIMENTS / "chain_counter.py"), "--parts", str(parts), "--time", "5",
        "--chain", "2", "--json", "--", "--steps", "40", timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    chain = json.loads(res.stdout.splitlines()[-1])
    first, second = chain["chain"]
    run_dir = Path(chain["run_dir"])
    assert wait_for((run_dir / "metrics.jsonl").exists, 120)
    subprocess.run(["scancel", "--signal=USR2", "--batch", str(first)], check=True, timeout=30)  # the limit's warning
    assert wait_for((run_dir / "result.json").exists, 180), read_events(run_dir / "events.jsonl")
    assert json.loads((run_dir / "result.json").read_text())["jobs"] == [str(first), str(second)]
    for job_dir_ in chain["job_dirs"]:
        assert any(e["event"] == "services_ready" for e in read_events(Path(job_dir_) / "events.jsonl"))
    for job in (flaky["job_id"], first, second):
        assert_no_leftovers(nodes, job, within_s=30)


def test_a_gpu_service_pool_gives_each_instance_its_own_share_of_the_gpus(pyxis_lab: list[str], tmp_path: Path) -> None:
    """A judge pool of two 2-GPU replicas on one 4-GPU node (the issue's two 4-GPU replicas on an
    8-GPU node, halved), in an image of its own (so isolated: each instance is PID 1 of its own
    namespace): each instance sees only its own GPUs, and the two shares are apart."""
    nodes = gpu_lab(pyxis_lab)
    parts = tmp_path / "gpu_pool.yaml"
    parts.write_text(
        "trainer: {nodes: 1, partition: labgpu}\n"
        "judge: {nodes: 1, partition: labgpu, gpus_per_node: 4, replicas_per_node: 2,\n"
        "        service: 'python3 judge.py --port {port}', ready: 'http:/health', required: true,\n"
        f"        image: {SANDBOX_IMAGE}}}\n"
    )
    res = run_cli(
        "submit", SPEC_PYXIS, str(PARTS / "hello_parts.py"), "--parts", str(parts), "--wait", "--json",
        cwd=PARTS, timeout=240,
    )  # fmt: skip
    job = json.loads(res.stdout.splitlines()[-1])
    assert res.returncode == 0 and job["state"] == "COMPLETED", (res.stdout[-1500:], res.stderr[-1500:])
    seen = []
    for instance in ("0", "1"):
        log = run_cli("logs", str(job["job_id"]), "--service", "judge", "--instance", instance, timeout=60).stdout
        found = re.search(r"'pid': 1, 'gpus': '([0-9,]*)'", log)
        assert found, log
        seen.append(set(found.group(1).split(",")))
    assert all(len(s) == 2 for s in seen) and not seen[0] & seen[1], seen
    assert_no_leftovers(nodes, job["job_id"], within_s=20)
