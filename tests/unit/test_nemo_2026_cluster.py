"""NeMo RL 2026's virtual-cluster surface beyond placement: the port bands and their helpers,
init_ray's branches as NeMo RL's tests drive them (Ray mocked), create_local_venv, and the
unified placement group with its topology rank order (a local Ray with logical GPUs)."""

from __future__ import annotations

import itertools
import os
import random
import socket
from unittest.mock import MagicMock, patch

import pytest

from slurm_rl.distributed import virtual_cluster as vc

pytestmark = pytest.mark.timeout(120)


# ---- ports ----------------------------------------------------------------------------------
def test_port_bands_are_ordered_below_the_ephemeral_floor() -> None:
    floor = 9000  # the lowest ephemeral floor seen on GPU nodes; stock Linux is 32768
    bands = [
        (vc.DEFAULT_DATA_PLANE_PORT_RANGE_LOW, vc.DEFAULT_DATA_PLANE_PORT_RANGE_HIGH),
        (vc.DEFAULT_GENERATION_ROUTER_PORT_RANGE_LOW, vc.DEFAULT_GENERATION_ROUTER_PORT_RANGE_HIGH),
        (vc.DEFAULT_DYNAMO_CONTROL_PORT_RANGE_LOW, vc.DEFAULT_DYNAMO_CONTROL_PORT_RANGE_HIGH),
        (vc.DEFAULT_MASTER_PORT_RANGE_LOW, vc.DEFAULT_MASTER_PORT_RANGE_HIGH),
        (vc.DEFAULT_GENERATION_PORT_RANGE_LOW, vc.DEFAULT_GENERATION_PORT_RANGE_HIGH),
        (vc.DEFAULT_GYM_PORT_RANGE_LOW, vc.DEFAULT_GYM_PORT_RANGE_HIGH),
    ]
    assert all(1024 < low < high for low, high in bands)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(bands)), bands  # no band overlaps the next
    assert bands[-1][1] < vc.DEFAULT_VLLM_PORT_RANGE_LOW
    assert (
        vc.DEFAULT_VLLM_PORT_RANGE_LOW + 8 * vc.DEFAULT_VLLM_PORTS_PER_ENGINE < vc.DEFAULT_SGLANG_ROUTER_PORT_RANGE_LOW
    )
    assert floor > vc.DEFAULT_SGLANG_PROMETHEUS_PORT_RANGE_HIGH


def test_data_plane_ports_are_distinct_bindable_and_in_band() -> None:
    ports = vc._reserve_data_plane_ports(3)
    assert len(set(ports)) == 3
    for port in ports:
        assert vc.DEFAULT_DATA_PLANE_PORT_RANGE_LOW <= port < vc.DEFAULT_DATA_PLANE_PORT_RANGE_HIGH
        with socket.socket() as s:  # no SO_REUSEADDR: the port is really free
            s.bind(("", port))


def test_a_narrowed_data_plane_band_runs_out(monkeypatch) -> None:
    low = vc.DEFAULT_DATA_PLANE_PORT_RANGE_LOW
    monkeypatch.setattr(vc, "DEFAULT_DATA_PLANE_PORT_RANGE_HIGH", low + 1)  # the band is read at call time
    try:
        assert vc._reserve_data_plane_ports(1) == [low]
    except RuntimeError:
        pytest.skip(f"port {low} is in use on this host")
    with pytest.raises(RuntimeError, match="Could not find a free port in range"):
        vc._reserve_data_plane_ports(2)  # the first choice is excluded from the second


def test_bind_socket_draws_from_the_given_rng_and_skips_excluded(monkeypatch) -> None:
    sock = MagicMock()
    assert vc._bind_socket_in_range(sock, 12100, 12200, rng=random.Random(7)) == random.Random(7).randint(12100, 12199)
    order = list(range(12200, 12300))
    random.Random(7).shuffle(order)
    assert vc._bind_socket_in_range(MagicMock(), 12200, 12300, max_retries=None, rng=random.Random(7)) == order[0]
    monkeypatch.setattr("random.shuffle", lambda xs: None)
    sock = MagicMock()
    assert vc._bind_socket_in_range(sock, 12020, 12023, max_retries=None, excluded_ports={12020, 12021}) == 12022
    sock.bind.assert_called_once_with(("", 12022))
    busy = MagicMock()
    busy.bind.side_effect = OSError("in use")
    with pytest.raises(RuntimeError, match=r"after 10 attempts"):
        vc._bind_socket_in_range(busy, 11999, 12000, max_retries=10)
    assert busy.bind.call_count == 10
    with pytest.raises(AssertionError, match="consecutive must be >= 1"):
        vc._get_free_consecutive_ports_local(14950, 15000, consecutive=0)


# ---- init_ray, as NeMo RL's tests drive it ----------------------------------------------------
def test_init_ray_reports_what_it_found() -> None:
    cases = [({"GPU": 1, "nrl_tag_0": 1}, vc.RAY_CLUSTER_REUSED_LOCAL), ({"GPU": 8}, vc.RAY_CLUSTER_EXTERNAL)]
    for resources, expected in cases:
        with (
            patch("slurm_rl.distributed._engine.ray_init._auto_address_state", return_value="none"),
            patch("ray.init") as init,
            patch("ray.shutdown") as shutdown,
            patch("ray.cluster_resources", return_value=resources),
            patch.dict(os.environ, {"CUDA_VISIBLE_DEVICES": "0"}, clear=True),
        ):
            assert vc._init_ray() == expected
        assert init.call_count == 1 and init.call_args.kwargs["address"] == "auto" and shutdown.call_count == 0


def test_init_ray_on_a_ray_client_address_connects_through_it_without_this_machines_env() -> None:
    """`slurm-rl attach JOB --client` sets RAY_ADDRESS=ray://...: init_ray connects there (no
    "auto" lookup, no local cluster) and ships no env_vars (a login node's are not the nodes')."""
    for resources, expected in [
        ({"slurm_managed_ray_cluster": 3}, vc.RAY_CLUSTER_SLURM_MANAGED),
        ({}, vc.RAY_CLUSTER_EXTERNAL),
    ]:
        with (
            patch("ray.init") as init,
            patch("ray.cluster_resources", return_value=resources),
            patch.dict(os.environ, {"RAY_ADDRESS": "ray://10.0.0.1:20001"}, clear=True),
        ):
            assert vc.init_ray() == expected
        assert init.call_count == 1 and init.call_args.kwargs["address"] == "ray://10.0.0.1:20001"
        sent = init.call_args.kwargs["runtime_env"]
        assert "env_vars" not in sent and sent["worker_process_setup_hook"].endswith("hygiene.scrub_launcher_env")


def test_init_ray_starts_a_tagged_cluster_with_the_excludes() -> None:
    with (
        patch("slurm_rl.distributed._engine.ray_init._auto_address_state", return_value="none"),
        patch("ray.init", side_effect=[ConnectionError("no cluster"), None]) as init,
        patch("ray.shutdown"),
        patch("ray.cluster_resources", return_value={"GPU": 1}),
        patch.dict(os.environ, {"CUDA_VISIBLE_DEVICES": "2,0", "NRL_RAY_RUNTIME_ENV_EXCLUDES": "data/**, ,ckpt/**"}),
    ):
        assert vc.init_ray() == vc.RAY_CLUSTER_STARTED_LOCAL
    fresh = init.call_args_list[1].kwargs
    assert fresh["resources"] == {"nrl_tag_0_2": 1} and fresh["runtime_env"]["excludes"] == ["data/**", "ckpt/**"]
    assert vc.ray_runtime_env_excludes({}) == []


def test_init_ray_replaces_another_device_sets_cluster_and_puts_hf_modules_first() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "1", "HF_MODULES_CACHE": "/hf/modules", "PYTHONPATH": "/project"}
    with (
        patch("slurm_rl.distributed._engine.ray_init._auto_address_state", return_value="usable"),
        patch("ray.init") as init,
        patch("ray.shutdown") as shutdown,
        patch("ray.cluster_resources", return_value={"GPU": 1, "nrl_tag_0": 1}),
        patch.dict(os.environ, env, clear=True),
    ):
        assert vc.init_ray() == vc.RAY_CLUSTER_STARTED_LOCAL
    assert init.call_count == 2 and shutdown.call_count == 1
    assert init.call_args_list[1].kwargs["resources"] == {"nrl_tag_1": 1}
    assert init.call_args_list[0].kwargs["runtime_env"]["env_vars"]["PYTHONPATH"] == "/hf/modules:/project"
    assert "excludes" not in init.call_args_list[1].kwargs["runtime_env"]


def test_a_cluster_that_does_not_answer_is_not_attached_to() -> None:
    with (
        patch("slurm_rl.distributed._engine.ray_init._auto_address_state", return_value="unusable"),
        patch("ray.init") as init,
        patch("ray.shutdown"),
        patch.dict(os.environ, {}, clear=True),
    ):
        assert vc.init_ray() == vc.RAY_CLUSTER_STARTED_LOCAL
    assert [c.kwargs["address"] for c in init.call_args_list] == ["local"]


# ---- create_local_venv -----------------------------------------------------------------------
def test_create_local_venv_builds_a_named_environment(tmp_path, monkeypatch) -> None:
    import subprocess

    from slurm_rl.utils.venvs import create_local_venv

    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path))
    python = create_local_venv("uv run --offline", "test_venv")
    assert python == f"{tmp_path}/test_venv/bin/python"
    out = subprocess.run([python, "-c", "import ray, sys; print(sys.prefix)"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"{tmp_path}/test_venv", out.stderr
    with pytest.raises(ValueError, match="plain directory name"):
        create_local_venv("uv run --offline", "../elsewhere")


# ---- PY_EXECUTABLES ----------------------------------------------------------------------------
def test_py_executables_name_the_project_and_survive_a_space(tmp_path, monkeypatch) -> None:
    import shlex
    import subprocess
    import sys

    from slurm_rl.distributed._engine.py_executables import EXTRAS, make_py_executables, project_root
    from slurm_rl.distributed.worker_env.uv_envs import parse_uv_run

    project = tmp_path / "my project"  # a space, as in /Users/First Last/...
    (project / "src" / "deep").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert project_root(str(project / "src" / "deep")) == str(project)  # the nearest pyproject.toml above
    assert project_root(str(tmp_path)) == str(tmp_path)  # none: the directory itself
    envs = make_py_executables(str(project))
    for name, extras in EXTRAS.items():
        words = shlex.split(getattr(envs, name))
        assert words[words.index("--directory") + 1] == str(project)
        assert parse_uv_run(getattr(envs, name))["extras"] == list(extras)
    assert sys.executable == envs.SYSTEM and vc.uv_py_executable(("vllm", "nemo_gym")).count("--extra") == 2
    probe = "from slurm_rl.distributed.virtual_cluster import PY_EXECUTABLES as P; print(P.VLLM == P.SYSTEM)"
    flagged = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "NEMO_RL_PY_EXECUTABLES_SYSTEM": "1"},
        capture_output=True,
        text=True,
    )
    assert flagged.stdout.strip() == "True", flagged.stderr
