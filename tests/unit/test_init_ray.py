"""init_ray's three branches, each in a fresh process with a real Ray where reachable."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.timeout(240), pytest.mark.ray]  # starts a local Ray: `pytest -m unit` skips it


def _run(code: str, env: dict[str, str]) -> str:
    full = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "CUDA_VISIBLE_DEVICES")}
    full.update(env)
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full, timeout=200
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def test_local_tag_ignores_device_order() -> None:
    from slurm_rl.distributed._engine.ray_init import local_tag, worker_env_vars

    assert local_tag({}) == "nrl_tag_ALL"
    assert local_tag({"CUDA_VISIBLE_DEVICES": "3,1"}) == local_tag({"CUDA_VISIBLE_DEVICES": "1,3"}) == "nrl_tag_1_3"
    assert worker_env_vars(
        {"SLURM_JOB_ID": "1", "PMIX_X": "1", "OMPI_Y": "1", "MPI_Z": "1", "PMI_RANK": "0", "KEEP": "1"}
    ) == {"KEEP": "1", "TORCH_CPP_LOG_LEVEL": "ERROR"}  # a quiet default the user's environment may override


def test_long_log_dir_is_refused_before_ray_starts() -> None:
    from slurm_rl.distributed import init_ray

    with pytest.raises(ValueError, match="too long for Ray's Unix sockets"):
        init_ray(log_dir="/tmp/" + "x" * 60)


def test_three_branches() -> None:
    import tempfile
    from pathlib import Path

    log_dir = Path(tempfile.mkdtemp(prefix="srl-t", dir="/tmp"))
    # 1) nothing running -> a fresh local cluster with our tag, log_dir as Ray's temp dir;
    # 2) a second process with the same tag (devices in another order) reuses it;
    # 3) a process with another tag starts its own instead.
    out = _run(
        f"""
        import os, subprocess, sys, ray
        from slurm_rl.distributed import init_ray
        print("first", init_ray(log_dir={str(log_dir)!r}))
        print("tag", "nrl_tag_0_1" in ray.cluster_resources())
        import psutil
        cmds = []
        for p in psutil.Process().children(recursive=True):
            try:
                cmds.append(" ".join(p.cmdline()))
            except psutil.NoSuchProcess:  # a worker that ended since it was listed
                pass
        print("dashboard process", any("dashboard/dashboard.py" in c for c in cmds))
        print("minimal agent", any("minimal_agent.py" in c for c in cmds))
        addr = ray.get_runtime_context().gcs_address
        env = dict(os.environ, RAY_ADDRESS=addr, CUDA_VISIBLE_DEVICES="1,0")
        code = "from slurm_rl.distributed import init_ray; print(init_ray())"
        run = lambda: subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        print("second", run().stdout.strip())
        env["CUDA_VISIBLE_DEVICES"] = "2"
        print("third", run().stdout.strip())
    """,
        {"CUDA_VISIBLE_DEVICES": "0,1", "RAY_AUTH_MODE": "disabled"},
    )
    assert "first local_new" in out and "tag True" in out
    # a lean node (worker_env/lean_node.py): no dashboard process, the agent minimal
    assert "dashboard process False" in out and "minimal agent True" in out, out
    assert "second local_reused" in out
    assert "third local_new" in out
    assert any(log_dir.iterdir())


def test_slurm_managed_branch_is_reused() -> None:
    out = _run(
        """
        import ray
        ray.init(num_cpus=1, include_dashboard=False, resources={"slurm_managed_ray_cluster": 1})
        import os, subprocess, sys
        env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)
        code = "from slurm_rl.distributed import init_ray; print(init_ray())"
        print(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.strip())
    """,
        {"RAY_AUTH_MODE": "disabled"},
    )
    assert out.strip().endswith("slurm_managed")


def test_unusable_auto_address_is_rejected_fast(monkeypatch) -> None:
    """A dead or foreign cluster behind RAY_ADDRESS costs one quick check, not Ray's ~20 s of
    connect retries, before init_ray starts its own."""
    import time

    from slurm_rl.distributed._engine.ray_init import _auto_address_state

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")
    t0 = time.monotonic()
    assert _auto_address_state() == "unusable"
    assert time.monotonic() - t0 < 5


def test_a_cluster_nemo_rl_started_is_reused() -> None:
    """NeMo RL tags its local clusters nrl_tag_<sorted devices>; init_ray reuses one started for
    the same device set, in any order."""
    out = _run(
        """
        import ray
        ray.init(num_cpus=1, include_dashboard=False, resources={"nrl_tag_0_1": 1})
        import os, subprocess, sys
        env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address, CUDA_VISIBLE_DEVICES="1,0")
        code = "from slurm_rl.distributed import init_ray; print(init_ray())"
        print(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.strip())
    """,
        {"RAY_AUTH_MODE": "disabled"},
    )
    assert out.strip().endswith("local_reused")


def test_workers_see_no_launcher_variables_in_either_environment(tmp_path) -> None:
    """NeMo RL issue 309: SLURM_*, PMI_*, PMIX_*, OMPI_*, MPI_*, RAY_JOB_ID and RAY_RAYLET_PID
    never reach a worker, whether inherited from the driver's Ray or set by an isolated
    interpreter's own wrapper."""
    py = tmp_path / "other-python"
    py.write_text(f'#!/bin/sh\nexport MPI_LOCALRANKID=3 PMIX_RANK=1\nexec {sys.executable} "$@"\n')
    py.chmod(0o755)
    out = _run(
        f"""
        import ray
        from slurm_rl.distributed import ACTOR_ENVIRONMENT_REGISTRY, RayVirtualCluster, RayWorkerGroup, init_ray
        init_ray()
        cluster = RayVirtualCluster([1], use_gpus=False)
        fqn = "tests.unit.workers.nemo_style.LauncherEnvWorker"
        group = RayWorkerGroup(cluster, fqn, name_prefix="system")
        print("system", ray.get(group.run_all_workers_single_data("launcher_vars")))
        group.shutdown()
        ACTOR_ENVIRONMENT_REGISTRY[fqn] = {str(py)!r}
        group = RayWorkerGroup(cluster, fqn, name_prefix="isolated")
        print("isolated", ray.get(group.run_all_workers_single_data("launcher_vars")))
        import psutil
        from slurm_rl.distributed.worker_env.setup_worker import LIGHT_SETUP_WORKER
        # the first group's workers may still be exiting: a process gone mid-look is skipped
        seen = []
        for p in psutil.Process().children(recursive=True):
            try:
                if p.name() == "raylet":
                    seen.append(str(LIGHT_SETUP_WORKER) in " ".join(p.cmdline()))
            except psutil.NoSuchProcess:
                pass
        print("light setup", seen)
    """,
        {
            "RAY_AUTH_MODE": "disabled",
            "SLURM_JOB_ID": "5",
            "SLURM_PROCID": "0",
            "PMI_RANK": "0",
            "OMPI_COMM_WORLD_RANK": "0",
            "RAY_JOB_ID": "01000000",
        },
    )
    assert "system [[]]" in out and "isolated [[]]" in out
    assert "light setup [True]" in out  # both groups' workers started through slurm-rl's setup script


def test_a_driver_in_one_job_refuses_another_jobs_cluster() -> None:
    out = _run(
        """
        import ray
        ray.init(num_cpus=1, include_dashboard=False, resources={"slurm_managed_ray_cluster": 1, "slurm_job_111": 1})
        import os, subprocess, sys
        code = "from slurm_rl.distributed import init_ray; print(init_ray())"
        for job in ("222", "111"):
            env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address, SLURM_JOB_ID=job)
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
            print(job, res.returncode, res.stdout.strip(), res.stderr.strip().splitlines()[-1:])
    """,
        {"RAY_AUTH_MODE": "disabled"},
    )
    assert "222 1" in out and "belongs to SLURM job 111, but this is job 222" in out
    assert "111 0 slurm_managed" in out


def test_an_untagged_cluster_is_used_except_by_a_local_run(tmp_path) -> None:
    """NeMo RL's rule: a running Ray that no init_ray tagged (``ray start``, KubeRay) is used as
    it is; a driver under ``slurm-rl run`` (a job dir, no SLURM job) gets its own Ray instead."""
    out = _run(
        f"""
        import ray
        ray.init(num_cpus=1, include_dashboard=False)
        import os, subprocess, sys
        env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)
        code = "from slurm_rl.distributed import init_ray; print(init_ray())"
        run = lambda e: subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True)
        print("plain", run(env).stdout.strip())
        print("run", run(dict(env, SLURM_RL_JOB_DIR={str(tmp_path)!r})).stdout.strip())
    """,
        {"RAY_AUTH_MODE": "disabled"},
    )
    assert "plain external" in out and "run local_new" in out, out
