"""The seed's contract (NeMo RL's 2025 distributed API, which API.md describes) beside 2026's:
what a test that patches the placement methods sees, the lazy form 2026 programs can ask for,
and the errors a newcomer meets (a cluster larger than its job, results of the wrong call, a
usage error from click itself, `list` piped into grep). Written for this project."""

from __future__ import annotations

import re
import time
from pathlib import Path
from types import SimpleNamespace
from unittest.mock import MagicMock

import pytest
from click.testing import CliRunner

from slurm_rl.distributed import RayWorkerGroup
from slurm_rl.distributed import virtual_cluster as vc
from slurm_rl.distributed._engine import job_fit
from slurm_rl.login.cli import cli
from slurm_rl.login.reading import job_tables

RETRIES = "NRL_VIRTUAL_CLUSTER_MAX_RETRIES"


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    out: list[float] = []
    monkeypatch.setattr(time, "sleep", out.append)
    monkeypatch.delenv(RETRIES, raising=False)
    monkeypatch.delenv(vc.LAZY_ENV, raising=False)
    return out


def test_the_constructor_places_through_init_placement_groups(monkeypatch, sleeps) -> None:
    init = MagicMock(return_value=[MagicMock()])
    monkeypatch.setattr(vc.RayVirtualCluster, "_init_placement_groups", init)
    vc.RayVirtualCluster([1])
    assert init.call_count == 1 and sleeps == []  # 2025: made in the constructor, once
    monkeypatch.setattr(vc.RayVirtualCluster, "get_placement_groups", MagicMock(return_value=[]))
    cluster = vc.RayVirtualCluster([2, 3], use_gpus=False, name="grid")  # nothing is allocated
    cluster.print_cluster_grid()


def test_the_constructor_retries_init_placement_groups_with_backoff(monkeypatch, sleeps) -> None:
    monkeypatch.setenv(RETRIES, "4")
    init = MagicMock(side_effect=vc.ResourceInsufficientError("not enough"))
    monkeypatch.setattr(vc.RayVirtualCluster, "_init_placement_groups", init)
    with pytest.raises(vc.ResourceInsufficientError, match=r"Maximum number of retries \(4\)"):
        vc.RayVirtualCluster([1])
    assert init.call_count == 4 and sleeps == [1, 2, 4, 8]


def test_each_constructor_retry_is_one_attempt_of_the_2026_method(monkeypatch, sleeps) -> None:
    monkeypatch.setenv(RETRIES, "3")
    create = MagicMock(side_effect=vc.ResourceInsufficientError("not enough"))
    monkeypatch.setattr(vc.RayVirtualCluster, "_create_placement_groups_internal", create)
    with pytest.raises(vc.ResourceInsufficientError):
        vc.RayVirtualCluster([1])
    assert create.call_count == 3 and sleeps == [1, 2, 4]  # not 3 x 3: no retries inside retries


@pytest.mark.parametrize("how", ["keyword", "env", "class"])
def test_a_lazy_cluster_places_on_first_use_the_2026_way(monkeypatch, sleeps, how) -> None:
    init = MagicMock(return_value=[])
    monkeypatch.setattr(vc.RayVirtualCluster, "_init_placement_groups", init)
    if how == "env":
        monkeypatch.setenv(vc.LAZY_ENV, "1")
    if how == "class":
        monkeypatch.setattr(vc.RayVirtualCluster, "lazy_placement", True)
    cluster = vc.RayVirtualCluster([1], **({"lazy": True} if how == "keyword" else {}))
    assert init.call_count == 0
    cluster._init_placement_groups()
    assert init.call_count == 1  # NeMo RL 2026's count: its own call only
    assert vc.RayVirtualCluster([1], lazy=False) and init.call_count == 2  # an explicit False wins


def test_bad_retry_settings_fail_in_the_constructor(monkeypatch, sleeps) -> None:
    monkeypatch.setenv(RETRIES, "0")
    with pytest.raises(AssertionError):
        vc.RayVirtualCluster([1])
    monkeypatch.setenv(RETRIES, "many")
    with pytest.raises(ValueError):
        vc.RayVirtualCluster([1])


# ---- a cluster larger than its job ----------------------------------------------------------
ONE_CPU = [job_fit.NodeShape(cpus=1, gpus=2)]


def test_what_a_job_lacks_and_the_flags_that_fix_it() -> None:
    assert job_fit.shortfall([2], 1, True, ONE_CPU) == ["2 CPUs on a node with 2 GPUs (its nodes have 1)"]
    assert job_fit.fix_flags([2], 1, True, ONE_CPU) == "--cpus-per-node 2"
    three = [job_fit.NodeShape(4, 0)] * 3
    assert job_fit.shortfall([4, 4, 4, 4], 1, False, three) == ["16 CPUs in all (the job has 12)"]
    assert job_fit.fix_flags([4, 4, 4, 4], 1, False, three) == "--nodes 4"
    assert job_fit.shortfall([2], 1, True, [job_fit.NodeShape(2, 1)]) == ["2 GPUs on one node (its nodes have 1)"]
    assert job_fit.shortfall([2], 1, False, ONE_CPU) == ["2 CPUs on one node (its nodes have 1)"]
    assert job_fit.fix_flags([2], 1, True, [job_fit.NodeShape(2, 1)]) == "--gpus-per-node 2"
    assert job_fit.shortfall([3, 3], 1, False, three) == []  # fits: the retries decide as before
    assert job_fit.shortfall([6], 1, False, three, unified=True) == []  # a unified group may spread


def _in_job(monkeypatch, tmp_path: Path, nodes: list[job_fit.NodeShape], total: int, events: str = "") -> None:
    (tmp_path / "events.jsonl").write_text(events)
    monkeypatch.setenv("SLURM_RL_JOB_DIR", str(tmp_path))
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setattr(job_fit, "_job_manifest", lambda env: SimpleNamespace(total_nodes=total))
    monkeypatch.setattr(job_fit, "_job_nodes", lambda: nodes)


def test_a_complete_job_too_small_fails_at_once(monkeypatch, tmp_path, sleeps) -> None:
    _in_job(monkeypatch, tmp_path, ONE_CPU, total=1)
    create = MagicMock(side_effect=lambda *a: job_fit.check([2], 1, True))
    monkeypatch.setattr(vc.RayVirtualCluster, "_create_placement_groups_internal", create)
    with pytest.raises(job_fit.JobTooSmallError) as caught:
        vc.RayVirtualCluster([2])
    assert create.call_count == 1 and sleeps == []  # no 63 s of retries
    message = str(caught.value)
    assert "\n" not in message
    assert "job 4242 has 1 node of 1 CPUs and 2 GPUs" in message
    assert "asks 2 bundles of 1 CPU and 1 GPU" in message and "resubmit with --cpus-per-node 2" in message


def test_a_job_that_can_still_grow_keeps_waiting(monkeypatch, tmp_path) -> None:
    _in_job(monkeypatch, tmp_path, ONE_CPU, total=2)  # a node of the job is still joining
    job_fit.check([2], 1, True)
    member = '{"event": "member_submitted", "member": 1, "slurm_job": 77, "kind": "grow"}\n'
    _in_job(monkeypatch, tmp_path, ONE_CPU, total=1, events=member)  # grow's member is pending
    job_fit.check([2], 1, True)
    monkeypatch.undo()  # the real manifest reader again
    monkeypatch.delenv("SLURM_RL_JOB_DIR", raising=False)  # not a slurm-rl job: a local or external Ray
    monkeypatch.setattr(job_fit, "_job_nodes", lambda: ONE_CPU)
    job_fit.check([2], 1, True)


# ---- results of the wrong call ----------------------------------------------------------------
def test_results_of_single_data_say_to_use_ray_get() -> None:
    group = RayWorkerGroup.__new__(RayWorkerGroup)
    with pytest.raises(TypeError, match=r"use ray\.get\(refs\)") as caught:
        group.get_all_worker_results([object(), object()])
    assert "\n" not in str(caught.value) and "run_all_workers_single_data" in str(caught.value)


# ---- output a newcomer meets --------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, flag",
    [(["grow", "123", "--nodes", "0"], "--nodes"), (["status", "--bogus"], "--bogus"), (["logs"], "JOB")],
)
def test_click_usage_errors_are_one_line_exit_2(argv, flag) -> None:
    res = CliRunner().invoke(cli, argv)
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("slurm-rl: error: ") and flag in lines[0]
    assert "--help" in lines[0]


def test_list_keeps_ids_and_times_whole_at_80_columns(monkeypatch, capsys) -> None:
    ids = ["local-20261128-180759-504211", "1234567", "local-20261128-181502-7"]
    dirs = []
    for i, job in enumerate(ids):
        manifest = MagicMock()
        manifest.stat.return_value.st_mtime = time.mktime((2026, 11, 28, 18, 7 + i, 0, 0, 0, -1))
        name = SimpleNamespace(name="a-very-long-experiment-name-that-goes-on")
        job_dir = f"/shared/home/someone/slurm_rl/a-very-long-experiment-name-that-goes-on/{job}"
        spec = Path(job_dir) / "spec.json"  # not there: the cluster column is empty
        dirs.append(SimpleNamespace(job_id=job, name_dir=name, job_dir=job_dir, manifest=manifest, spec=spec))
    state = SimpleNamespace(state="COMPLETED", shown_state="COMPLETED", progress=None)
    monkeypatch.setattr(
        job_tables, "states_by_cluster", lambda dirs, client, client_for: ({p.job_id: None for p in dirs}, {}, [])
    )
    monkeypatch.setattr(job_tables, "summarize", lambda p, s: state)
    monkeypatch.setattr(job_tables, "replace", lambda summary, **kw: summary)
    monkeypatch.setenv("COLUMNS", "80")
    job_tables.print_list(dirs, client=None)
    out = capsys.readouterr().out
    for i, job in enumerate(ids):
        row = next(line for line in out.splitlines() if re.search(rf"(^|\s){re.escape(job)}(\s|$)", line))
        assert f"11-28 18:{7 + i:02d}" in row and "COMPLETED" in row
    assert max(len(line) for line in out.splitlines()) <= 80


def test_a_cpu_only_head_does_not_make_gpus_look_short() -> None:
    nodes = [job_fit.NodeShape(2, 0), job_fit.NodeShape(1, 2), job_fit.NodeShape(1, 2)]  # --head-node cpu
    assert job_fit.shortfall([2, 2], 1, True, nodes) == ["2 CPUs on a node with 2 GPUs (its nodes have 1)"]
    assert job_fit.fix_flags([2, 2], 1, True, nodes) == "--cpus-per-node 2"  # the GPU nodes lack CPUs, not GPUs
    assert job_fit.shortfall([1, 1], 1, True, nodes) == []  # fits on the GPU nodes
