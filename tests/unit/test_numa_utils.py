"""NUMA binding of GPU workers (NeMo RL 2026's numa_utils), without a GPU: the affinity file,
CUDA_VISIBLE_DEVICES mapping, a real sched_setaffinity, and nvidia-smi's topology table."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_rl.distributed import numa_utils
from slurm_rl.distributed.numa_utils import (
    _load_libnuma,
    _parse_cpulist,
    _set_numa_membind,
    bind_to_gpu_numa,
    read_affinity_file,
    resolve_visible_gpu_id,
    topo_numa_nodes,
)

# nvidia-smi topo -m of a 2-socket node (trimmed): the NUMA Affinity column is the one before last
TOPO = """\
\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tNV18\tSYS\t0-71\t0\t\tN/A
GPU1\tNV18\t X \tNV18\tSYS\t0-71\t0\t\tN/A
GPU2\tNV18\tNV18\t X \tNODE\t\t1,2-17\t\tN/A
NIC0\tSYS\tSYS\tNODE\t X
"""


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3", {0, 1, 2, 3}), ("0-1,8,10-11", {0, 1, 8, 10, 11}), (" 0-1 , 4 ", {0, 1, 4}), ("42", {42})],
)
def test_cpu_lists(text: str, cpus: set[int]) -> None:
    assert _parse_cpulist(text) == cpus


@pytest.mark.parametrize(
    ("cvd", "local", "gpu"),
    [
        ("4,5", 1, 5),
        ("0,1,2,3", 3, 3),
        ("5", 0, 5),
        (None, 0, None),
        ("", 0, None),
        ("4,5", 2, None),
        ("GPU-a", 0, None),
    ],
)
def test_local_device_to_physical_gpu(monkeypatch: pytest.MonkeyPatch, cvd: str | None, local: int, gpu: int) -> None:
    if cvd is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", cvd)
    assert resolve_visible_gpu_id(local) == gpu


def test_binding_pins_to_the_gpus_cpus_and_says_no_otherwise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        pytest.skip("needs 2 CPUs to bind to one of them")
    affinity = tmp_path / "gpu_cpu_affinity.txt"
    affinity.write_text(f"0:{available[0]}\n1:{available[0]}\n2:{available[1]}\n")
    monkeypatch.setattr(numa_utils, "GPU_CPU_AFFINITY_PATH", str(affinity))
    monkeypatch.setenv("NRL_DISABLE_NUMA_MEMBIND", "1")
    monkeypatch.delenv("NRL_DISABLE_NUMA_BINDING", raising=False)
    try:
        assert bind_to_gpu_numa(7) is False  # not in the file
        assert bind_to_gpu_numa(2) is True and os.sched_getaffinity(0) == {available[1]}
        monkeypatch.setenv("NRL_DISABLE_NUMA_BINDING", "1")
        assert bind_to_gpu_numa(0) is False and os.sched_getaffinity(0) == {available[1]}
        monkeypatch.setattr(numa_utils, "GPU_CPU_AFFINITY_PATH", str(tmp_path / "absent"))
        monkeypatch.delenv("NRL_DISABLE_NUMA_BINDING")
        assert bind_to_gpu_numa(0) is False
    finally:
        os.sched_setaffinity(0, set(available))


def test_membind_is_off_when_disabled_or_without_libnuma(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NRL_DISABLE_NUMA_MEMBIND", "1")
    assert _set_numa_membind({0}) is False
    monkeypatch.delenv("NRL_DISABLE_NUMA_MEMBIND")
    assert _set_numa_membind(set(os.sched_getaffinity(0))) is (_load_libnuma() is not None)


def test_the_nodes_affinity_file_from_nvidia_smis_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert topo_numa_nodes(TOPO) == {0: 0, 1: 0, 2: 1}
    sysfs = tmp_path / "node"
    for node, cpus in ((0, "0-71"), (1, "72-143")):
        (sysfs / f"node{node}").mkdir(parents=True)
        (sysfs / f"node{node}" / "cpulist").write_text(cpus + "\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{TOPO}EOF\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    out = tmp_path / "aff.txt"
    assert numa_utils.write_affinity_file(out, sysfs=str(sysfs)) == 3
    assert read_affinity_file(out) == {0: set(range(72)), 1: set(range(72)), 2: set(range(72, 144))}
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert numa_utils.write_affinity_file(tmp_path / "none.txt") == 0 and not (tmp_path / "none.txt").exists()
