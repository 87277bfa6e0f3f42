"""uv environments for worker classes: built once per node per job from a local wheel (offline),
in the job's node-local temp dir, reused by every later group; the driver never imports the
package."""

from __future__ import annotations

import base64
import hashlib
import shutil
import zipfile
from pathlib import Path

import pytest
import ray

from slurm_rl.distributed import ACTOR_ENVIRONMENT_REGISTRY, RayVirtualCluster, RayWorkerGroup
from slurm_rl.distributed.worker_env.uv_envs import _PREPARED, is_uv, parse_uv_run
from tests.unit.conftest import local_ray

pytestmark = [pytest.mark.timeout(240), pytest.mark.ray]  # starts a local Ray: `pytest -m unit` skips it
FQN = "tests.unit.workers.nemo_style.UvProbe"


def make_wheel(directory: Path, name: str = "srl_tinypkg", version: str = "0.1") -> Path:
    """A minimal, valid pure-Python wheel, written by hand (no build backend, no network)."""
    files = {
        f"{name}/__init__.py": b"VALUE = 42\n",
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{name}-{version}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = [
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
        for p, d in files.items()
    ] + [f"{name}-{version}.dist-info/RECORD,,"]
    files[f"{name}-{version}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for p, d in files.items():
            zf.writestr(p, d)
    return path


def test_uv_run_lines_are_parsed_and_checked(tmp_path: Path) -> None:
    assert is_uv("uv run --locked") and not is_uv("/usr/bin/python3")
    spec = parse_uv_run(f"uv run --offline -f {tmp_path} --with 'pkg==1.0' --with-requirements req.txt")
    assert spec["offline"] and spec["find_links"] == [str(tmp_path)] and spec["with"] == ["pkg==1.0"]
    assert spec["requirements"] == [str(Path("req.txt").resolve())] and spec["sync"] is None
    assert parse_uv_run("uv run --locked --extra vllm")["sync"] == "--locked"
    with pytest.raises(ValueError, match="unsupported uv run option '--isolated'"):
        parse_uv_run("uv run --isolated")
    with pytest.raises(ValueError, match="'uv run"):
        parse_uv_run("uv pip install x")


@pytest.mark.skipif(
    shutil.which("uv") is None and not __import__("importlib").util.find_spec("uv"),
    reason="uv is not installed (pip install uv; the test extras include it)",
)
def test_a_uv_environment_is_built_once_and_reused(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels)
    ACTOR_ENVIRONMENT_REGISTRY[FQN] = f"uv run --offline --find-links {wheels} --with srl-tinypkg"
    try:
        with local_ray(num_cpus=4):
            cluster = RayVirtualCluster([2], use_gpus=False)
            first = RayWorkerGroup(cluster, FQN, name_prefix="uv1")
            (python, value), _ = ray.get(first.run_all_workers_single_data("probe"))
            first.shutdown()
            env_dir = Path(python).parent.parent
            session = ray._private.worker._global_node.get_session_dir_path()
            assert value == 42 and str(env_dir).startswith(f"{session}/venvs/uv-")
            built_at = (env_dir / ".ready").read_text()
            second = RayWorkerGroup(cluster, FQN, name_prefix="uv2")
            assert [v for _, v in ray.get(second.run_all_workers_single_data("probe"))] == [42, 42]
            assert (env_dir / ".ready").read_text() == built_at and len(_PREPARED[str(env_dir)]) == 1
            second.shutdown()
            cluster.shutdown()
        with pytest.raises(ImportError):
            import srl_tinypkg  # type: ignore[import-not-found]  # noqa: F401 - only the workers have it
    finally:
        del ACTOR_ENVIRONMENT_REGISTRY[FQN]
