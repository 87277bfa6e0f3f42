"""Preflight (--preflight): the judgement of every node's results (core/node_verdict.py) row by row,
the local checks against this machine, the torch part with a real gloo exchange between two
processes, and the flags' bad values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_rl.core import causes as c
from slurm_rl.core.causes import Cause
from slurm_rl.core.events import read_events
from slurm_rl.core.node_verdict import Check, NodeResult, judge
from slurm_rl.job import node_checks as preflight
from tests.conftest import REPO, run_cli

OK = {name: Check(name, True, "fine") for name in ("disk", "fabric", "python")}


def node(name: str, rank: int, *checks: Check, done: bool = True, sends: float | None = 0.01) -> NodeResult:
    base = [OK["disk"], OK["fabric"], OK["python"]]
    base = [next((c for c in checks if c.name == b.name), b) for b in base]
    if done and sends is not None:
        base.append(Check("collective", True, "sent", sends))
    return NodeResult(name, rank, tuple(base + [c for c in checks if c.name not in OK]), done)


ROWS = [
    ("all good", [node("node1", 0), node("node2", 1)], 2, True, []),
    ("one not in yet", [node("node1", 0), node("node2", 1, done=False)], 2, False, []),
    (
        "a full disk, known before the rest",
        [node("node1", 0, done=False), node("node2", 1, Check("disk", False, "0.0 GiB free in /tmp"), done=False)],
        2,
        False,
        [("node2", "disk")],
    ),
    (
        "the head's own fabric",
        [node("node1", 0, Check("fabric", False, "fab0 is down")), node("node2", 1)],
        2,
        False,
        [("node1", "fabric")],
    ),
    (
        "a Python without torch",
        [
            node("node1", 0),
            node("node3", 2, Check("python", False, "cannot import torch"), sends=None),
            node("node2", 1),
        ],
        3,
        False,
        [("node3", "python")],
    ),
    (
        "a slow sender",
        [node("node1", 0), node("node2", 1, sends=2.4), node("node3", 2, sends=0.02)],
        3,
        False,
        [("node2", "collective")],
    ),
    ("slow of two", [node("node1", 0, sends=0.9), node("node2", 1, sends=0.05)], 2, False, [("node1", "collective")]),
    ("jitter is no fault", [node("node1", 0, sends=0.3), node("node2", 1, sends=0.01)], 2, True, []),
    (
        "a collective that failed everywhere, nothing else",
        [
            node("node1", 0, Check("collective", False, "the gloo exchange failed here: timeout"), sends=None),
            node("node2", 1),
        ],
        2,
        False,
        [("node1", "collective")],
    ),
]


@pytest.mark.parametrize(("results", "nodes", "ok", "bad"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_a_bad_node_is_named_with_its_check(results: list[NodeResult], nodes: int, ok: bool, bad: list) -> None:
    verdict = judge(results, nodes)
    assert verdict.ok == ok and [(n, c) for n, c, _ in verdict.bad] == bad


def test_a_result_reads_back() -> None:
    r = node("node2", 1, Check("disk", False, "0.1 GiB free"))
    assert NodeResult.from_dict(json.loads(json.dumps(r.as_dict()))) == r


def test_the_local_checks_measure_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert preflight.disk_check([tmp_path / "not" / "yet"]).ok  # the nearest existing dir's filesystem
    monkeypatch.setattr(preflight, "MIN_FREE_BYTES", 1 << 60)
    full = preflight.disk_check([tmp_path])
    assert not full.ok and full.found.endswith("(needs 1073741824.0 GiB)") and str(tmp_path) in full.found
    assert preflight.fabric_check("lo").ok and preflight.fabric_check(None).ok
    missing = preflight.fabric_check("fab-none0")
    assert not missing.ok and missing.found == "fab-none0 does not exist here"
    assert preflight.gpu_check(0) is None
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    assert preflight.gpu_check(2) == Check("gpus", False, "SLURM gave 2 GPU(s) and there is no nvidia-smi")


def test_the_torch_part_exchanges_through_gloo_between_two_nodes(tmp_path: Path) -> None:
    store = tmp_path / "0.preflight-store"
    argv = [sys.executable, "-m", "slurm_rl.job.node_checks_torch"]
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}
    procs = [
        subprocess.Popen([*argv, str(r), "2", str(store), "0", "30", "127.0.0.1"], stdout=subprocess.PIPE, env=env)
        for r in (0, 1)
    ]
    out = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    for checks in out:
        by = {c["name"]: c for c in checks}
        assert by["python"]["ok"] and by["collective"]["ok"], checks
        assert by["collective"]["seconds"] < 5 and "gloo all-reduce" in by["collective"]["found"]


@pytest.mark.parametrize(("cuda", "backend"), [((True, True, True), "nccl"), ((True, False, True), "gloo")])
def test_every_node_takes_nccl_only_where_all_see_a_gpu(cuda: tuple[bool, ...], backend: str) -> None:
    import datetime
    from concurrent.futures import ThreadPoolExecutor

    import torch.distributed as dist

    from slurm_rl.job.node_checks_torch import choose_backend

    wait = datetime.timedelta(seconds=30)
    head = dist.TCPStore("127.0.0.1", 0, len(cuda), True, wait, wait_for_workers=False)
    stores = [head, *(dist.TCPStore("127.0.0.1", head.port, len(cuda), False, wait) for _ in cuda[1:])]
    with ThreadPoolExecutor(len(cuda)) as pool:  # one node's GPU-less torch turns every node to gloo
        chosen = list(pool.map(lambda r: choose_backend(stores[r], r, len(cuda), cuda[r]), range(len(cuda))))
    assert chosen == [backend] * len(cuda)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--on-bad-node", "maybe"], "--on-bad-node 'maybe': Input should be 'exclude' or 'fail'"),
        (
            ["--preflight", "--parts", str(REPO / "tests" / "lab" / "experiments" / "parts" / "parts.yaml")],
            "with --parts",
        ),
    ],
)
def test_bad_preflight_flags_exit_2_with_one_line(argv: list[str], said: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CLUSTER_SPEC_PATH"}
    exp = str(REPO / "tests" / "lab" / "experiments" / "hold.py")
    res = run_cli("submit", str(REPO / "cluster_specs" / "lab.json"), exp, *argv, "--dry-run", env=env)
    assert res.returncode == 2 and res.stdout == "" and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert said in res.stderr, res.stderr


def _node(job_dir: Path, rank: int, **manifest: object):  # type: ignore[no-untyped-def]
    """Node ``rank`` of a 2-node job with --preflight, in a job dir both share, on this machine."""
    import io

    from slurm_rl.core.manifest import JobManifest
    from slurm_rl.core.paths import JobPaths
    from slurm_rl.job.context import NodeContext
    from slurm_rl.job.network import NodeAddress

    paths = JobPaths(job_dir)
    paths.markers.mkdir(parents=True, exist_ok=True)
    m = JobManifest(slurm_rl_version="0", cluster_name="lab", nodes=2, preflight=True, **manifest)  # type: ignore[arg-type]
    environ = {
        "SLURM_JOB_ID": job_dir.name,
        "SLURM_NODEID": str(rank),
        "SLURMD_NODENAME": f"node{rank + 1}",
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_CPUS_ON_NODE": "2",
    }
    ctx = NodeContext.from_environ(environ, paths, m, io.StringIO())
    ctx._address = NodeAddress("127.0.0.1", "lo")
    return ctx


def test_two_nodes_preflight_and_node_0_waits_for_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    head, worker = _node(tmp_path / "77", 0), _node(tmp_path / "77", 1)
    for ctx in (head, worker):
        preflight.NodePreflight(ctx).start()
    assert preflight.preflight_passed(head) and head.failure is None
    said = [e for e in read_events(head.paths.events) if e["event"] == "preflight"]
    assert sorted(e["node"] for e in said) == ["node1", "node2"] and all(e["ok"] for e in said), said
    assert next(e for e in read_events(head.paths.events) if e["event"] == "preflight_verdict")["ok"]


def test_a_bad_node_fails_the_attempt_with_its_check_as_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preflight, "MIN_FREE_BYTES", 1 << 60)  # every disk is full
    head, worker = _node(tmp_path / "78", 0), _node(tmp_path / "78", 1)
    preflight.NodePreflight(worker).start()  # node 0's own result is not needed to know node2 is bad
    assert not preflight.preflight_passed(head)
    assert head.failure is not None and head.failure.startswith("preflight: node2 failed the check disk: ")
    assert head.failure.endswith("; the job goes again without node2 (--on-bad-node exclude)")
    assert head.failure_cause == Cause(c.PREFLIGHT, "node2", check="disk")
    assert preflight.found_bad(worker) == (head.failure, head.failure_cause)  # a node failing of it says so too


def test_every_node_a_first_verdict_finds_bad_is_named_and_none_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two bad nodes in one attempt: one retry without both, not one retry each (each costs
    SLURM's requeue delay and a queue wait)."""
    monkeypatch.setattr(preflight, "MIN_FREE_BYTES", 1 << 60)
    head, worker = _node(tmp_path / "79", 0), _node(tmp_path / "79", 1)
    for ctx in (worker, head):
        preflight.NodePreflight(ctx).start()
    t0 = time.monotonic()
    assert not preflight.preflight_passed(head)
    assert time.monotonic() - t0 < preflight.OWN_RESULT_WAIT_S  # every local result was in: no grace waited out
    assert head.failure is not None
    assert head.failure.startswith("preflight: node1 failed the check disk: "), head.failure
    assert "; node2 failed the check disk: " in head.failure
    assert head.failure.endswith("; the job goes again without node1, node2 (--on-bad-node exclude)")
    assert head.failure_cause == Cause(c.PREFLIGHT, "node1", check="disk")  # the cause: the first
    assert head.paths.bad_nodes.read_text().split() == ["node1", "node2"]


def test_under_on_bad_node_fail_no_node_is_set_aside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "MIN_FREE_BYTES", 1 << 60)
    head, worker = _node(tmp_path / "80", 0, on_bad_node="fail"), _node(tmp_path / "80", 1, on_bad_node="fail")
    for ctx in (worker, head):
        preflight.NodePreflight(ctx).start()
    assert not preflight.preflight_passed(head)
    assert head.failure is not None and head.failure.endswith("; --on-bad-node exclude would run it again without them")
    assert not head.paths.bad_nodes.exists()
