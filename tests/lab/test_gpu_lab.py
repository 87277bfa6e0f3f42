"""GPUs handed out by SLURM (`slurm-lab up --gpus 4`: GRES gpu:labgpu:4 per node over device
files, no GPU): the request reaches SLURM, each node's Ray advertises what SLURM gave the job
there, every GPU worker sees only its own device within the job's, two jobs on one node get
disjoint devices, the steps slurm-rl adds to a GPU job ask for none, and a request for more
GPUs than a node has is refused before the queue. Answers are checked against SLURM's own
allocation (``scontrol show job -d``), never against the lab's nvidia-smi stand-in."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.lab.helpers import (
    SPEC_PYXIS,
    STATE,
    assert_no_leftovers,
    job_dir,
    lab_up_args,
    last_json,
    pyxis_missing,
    start,
    submit,
    wait_for,
    wait_gone,
)

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]
SPEC_GPU = str(REPO / "cluster_specs" / "lab-gpu.json")


def lab_gpus() -> int:
    args = lab_up_args()
    return int(args[args.index("--gpus") + 1]) if "--gpus" in args else 0


@pytest.fixture(scope="module")
def gpu_lab(lab: list[str]) -> list[str]:
    if lab_gpus() < 4:
        pytest.skip("the lab has no GPUs: bring it up with --gpus 4 (the README's test command does)")
    return lab


def allocated(scontrol: str) -> dict[str, set[str]]:
    """{node: GPU indexes SLURM gave the job there}, from ``scontrol show job -d``'s
    ``Nodes=node[1-2] ... GRES=gpu:labgpu:2(IDX:0-1)`` lines."""
    from hostlist import expand_hostlist

    out: dict[str, set[str]] = {}
    for nodes, idx in re.findall(r"\bNodes=(\S+) .*?GRES=\S*?\(IDX:([\d,-]+)\)", scontrol):
        ids = set()
        for part in idx.split(","):
            lo, _, hi = part.partition("-")
            ids.update(str(i) for i in range(int(lo), int(hi or lo) + 1))
        for node in expand_hostlist(nodes):
            out[node] = ids
    return out


def reported(data: dict) -> dict:
    return last_json((job_dir(data) / "logs" / "driver.log").read_text(), "workers")


def check_workers(report: dict, gpus_per_node: int, nodes: int, scontrol: str = "") -> dict[str, set[str]]:
    """Every worker one GPU of its node's allocation, all (node, device) pairs distinct, Ray's
    GPU count per node what SLURM gave; returns SLURM's allocation (``scontrol show job -d``,
    the driver's unless given)."""
    given = allocated(scontrol or report["scontrol"])
    workers = report["workers"]
    assert len(workers) == gpus_per_node * nodes and len(given) == nodes, report
    pairs = {(w["host"], w["cuda_visible_devices"]) for w in workers}
    assert len(pairs) == len(workers), workers  # no two workers on one device
    for w in workers:
        assert [w["cuda_visible_devices"]] == w["gpu_ids"], w  # Ray's ids agree with the variable
        assert w["cuda_visible_devices"] in given[w["host"]], (w, given)
    assert report["status_gpu_ids"] == [w["gpu_ids"] for w in workers], report  # get_worker_status() agrees
    assert sorted(int(w["rank"]) for w in workers) == list(range(len(workers)))
    assert {w["world_size"] for w in workers} == {str(len(workers))}
    assert set(report["ray_gpus"].values()) == {gpus_per_node}, report["ray_gpus"]
    return given


@pytest.mark.parametrize(
    "layout",
    # the smoke set (other SLURMs) takes the hetjob: the same GRES path as gpu-nodes, plus the hetjob
    [
        (),
        pytest.param(
            ("--head-partition", "labcpu", "--partition", "labgpu"),
            marks=[pytest.mark.smoke, pytest.mark.smoke_versions],
        ),
    ],
    ids=["gpu-nodes", "cpu-head-hetjob"],
)
def test_gpu_workers_get_distinct_devices_within_slurms_allocation(gpu_lab: list[str], layout: tuple[str, ...]) -> None:
    """2 nodes x 2 GPUs (and the same behind a CPU-only head, a hetjob's first component): 4
    workers on 4 distinct (node, device) pairs inside SLURM's allocation; then a tied group of
    node 0's 2 GPUs (one node, distinct devices, LOCAL_RANK 0 and 1) and a bundle's address."""
    extra = ("--gpus-per-node", "2", *layout)
    res, data = submit("gpu_workers.py", "2", nodes=2, spec=SPEC_GPU, extra=extra)
    assert res.returncode == 0, res.stderr[-3000:]
    report = reported(data)
    given = check_workers(report, 2, 2)
    tied = report["tied"]["members"]
    assert report["tied"]["groups"] == [[0, 1]] and len({w["host"] for w in tied}) == 1, report["tied"]
    assert {w["cuda_visible_devices"] for w in tied} <= given[tied[0]["host"]] and len(tied) == 2, (tied, given)
    assert sorted(w["local_rank"] for w in tied) == ["0", "1"], tied
    address, port = report["address_and_port"]
    assert address.startswith("10.77.0.") and 1024 < port < 65536, report["address_and_port"]
    if layout:
        assert "#SBATCH hetjob" in (job_dir(data) / "sbatch.sh").read_text()
        assert len(given) == 2 and "node1" not in given, given  # labgpu (node2..); the head (labcpu, node1) has none
    assert_no_leftovers(gpu_lab, data["job_id"])


@pytest.mark.smoke
def test_two_jobs_on_one_node_get_disjoint_devices_and_added_steps_ask_for_none(gpu_lab: list[str]) -> None:
    flags = ("--gpus-per-node", "2", "--nodelist", "node3")
    first = start("gpu_workers.py", "2", "hold", nodes=1, spec=SPEC_GPU, extra=flags)
    second = start("gpu_workers.py", "2", "hold", nodes=1, spec=SPEC_GPU, extra=flags)
    try:
        for data in (first, second):
            assert wait_for((job_dir(data) / "driver_ready").exists, 180), f"job {data['job_id']} never ready"
        a, b = (check_workers(reported(d), 2, 1)["node3"] for d in (first, second))
        assert not a & b, (a, b)  # SLURM's indexes: disjoint
        workers = [{w["cuda_visible_devices"] for w in reported(d)["workers"]} for d in (first, second)]
        assert not workers[0] & workers[1], workers  # and so are the workers' devices
        # a step slurm-rl adds to a job whose GPUs are all taken does not wait for them
        att = run_cli("attach", str(first["job_id"]), "--", "hostname", timeout=60)
        assert att.returncode == 0 and att.stdout.strip() == "node3", att.stderr
        down = run_cli("teardown", str(second["job_id"]), timeout=120)
        assert down.returncode == 0, down.stderr
        assert_no_leftovers(gpu_lab, second["job_id"])
    finally:
        for data in (first, second):
            (job_dir(data) / "release").touch()
    for data in (first, second):
        wait_gone(data["job_id"])
        assert_no_leftovers(gpu_lab, data["job_id"])


def test_more_gpus_than_a_node_has_is_refused_before_the_queue(gpu_lab: list[str]) -> None:
    res = run_cli("submit", SPEC_GPU, str(REPO / "examples" / "hello.py"), "--nodes", "1", "--gpus-per-node", "5")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "--gpus-per-node 5: partition lab's largest node has 4 GPUs" in res.stderr, res.stderr


def test_a_cluster_larger_than_its_job_fails_at_once_naming_the_flag(gpu_lab: list[str]) -> None:
    """--cpus-per-node 1 and two GPU bundles of one CPU each: the job's one node cannot hold
    them and nothing can join it, so the driver fails in seconds (not after 63 s of retries),
    saying what the job has, what the cluster asks and the flag to change."""
    flags = ("--gpus-per-node", "2", "--cpus-per-node", "1")
    res, data = submit("too_big.py", nodes=1, spec=SPEC_GPU, extra=flags)
    assert res.returncode != 0 and data["state"] == "FAILED", res.stderr[-3000:]
    log = (job_dir(data) / "logs" / "driver.log").read_text()
    took = re.search(r"RayVirtualCluster failed after ([\d.]+) s", log)
    assert took and float(took.group(1)) < 10, log[-3000:]
    line = next(x for x in log.splitlines() if "JobTooSmallError: " in x)
    assert "has 1 node of 1 CPUs and 2 GPUs" in line and "asks 2 bundles of 1 CPU and 1 GPU" in line, line
    assert "resubmit with --cpus-per-node 2" in line, line
    logs = run_cli("logs", str(data["job_id"]), timeout=60)  # where a user looks
    assert "resubmit with --cpus-per-node 2" in logs.stdout, logs
    assert_no_leftovers(gpu_lab, data["job_id"])


def test_gpu_workers_in_containers(gpu_lab: list[str]) -> None:
    if pyxis_missing():
        pytest.skip(f"the lab has no Pyxis: {pyxis_missing()}")
    data = start("gpu_workers.py", "2", "hold", nodes=2, spec=SPEC_PYXIS, extra=("--gpus-per-node", "2"))
    try:
        assert wait_for((job_dir(data) / "driver_ready").exists, 240), f"job {data['job_id']} never ready"
        scontrol = subprocess.run(
            ["scontrol", "show", "job", "-d", str(data["job_id"])], capture_output=True, text=True, timeout=30
        ).stdout
        check_workers(reported(data), 2, 2, scontrol)
    finally:
        (job_dir(data) / "release").touch()
    wait_gone(data["job_id"])
    assert_no_leftovers(gpu_lab, data["job_id"])


def test_device_files_are_the_labs(gpu_lab: list[str]) -> None:
    """Lab equipment: one character device per GPU, each its own number (195:K)."""
    devices = sorted(Path(STATE / "dev").glob("nvidia*"))
    assert len(devices) == lab_gpus()
    assert len({d.stat().st_rdev for d in devices}) == len(devices)
