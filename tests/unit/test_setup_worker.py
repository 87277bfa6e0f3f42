"""slurm-rl's light setup script starts a worker exactly as Ray's own ``setup_worker.py`` does:
the same environment, interpreter, command prefix and arguments, for the same raylet arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_rl.distributed.worker_env import setup_worker as choice
from slurm_rl.distributed.worker_env.setup_worker import LIGHT_SETUP_WORKER

RAYS_OWN = Path(__import__("ray").__file__).parent / "_private" / "workers" / "setup_worker.py"

WORKER = """
import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "exe": os.environ.get("VIA_WRAPPER"), "prefix": os.environ.get("PREFIX_SET"),
                  "env": {k: v for k, v in os.environ.items() if k.startswith("T_")}}))
"""


def start(script: Path, context: dict[str, object], args: list[str], tmp: Path) -> dict[str, object]:
    env = {**os.environ, "T_KEEP": "kept", "T_HOME": "/h"}
    argv = [sys.executable, str(script), f"--serialized-runtime-env-context={json.dumps(context)}", "--language=PYTHON"]
    res = subprocess.run([*argv, *args], capture_output=True, text=True, env=env, cwd=tmp, timeout=60, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "case",
    ["env_vars", "py_executable", "command_prefix", "entrypoint"],
)
def test_the_worker_starts_as_with_rays_own_script(case: str, tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "other.py").write_text(WORKER.replace("sys.argv[1:]", '["other", *sys.argv[1:]]'))
    wrapper = tmp_path / "wrapped python"  # a uv/venv interpreter wrapper, its path with a space
    wrapper.write_text(f'#!/bin/sh\nexport VIA_WRAPPER=yes\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    contexts: dict[str, dict[str, object]] = {
        "env_vars": {"env_vars": {"T_A": "1", "T_B": "${T_HOME}/x $T_HOME", "T_C": "${T_UNSET}y", "T_Q": 'it\'s "q"'}},
        "py_executable": {"py_executable": f"'{wrapper}'", "env_vars": {"T_A": "2"}},
        "command_prefix": {"command_prefix": ["export", "PREFIX_SET=1", "&&"]},
        "entrypoint": {"override_worker_entrypoint": "other.py"},
    }
    args = ["worker.py", "--node-ip-address=10.0.0.1", "an arg with spaces", "it's", "$HOME", "--flag=a b"]
    theirs = start(RAYS_OWN, contexts[case], args, tmp_path)
    ours = start(LIGHT_SETUP_WORKER, contexts[case], args, tmp_path)
    assert ours == theirs
    assert theirs["argv"][-4:] == ["an arg with spaces", "it's", "$HOME", "--flag=a b"]


def test_nodes_use_it_unless_told_to_keep_rays(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray._private.node as ray_node
    from ray._private.parameter import RayParams

    seen: list[str | None] = []
    monkeypatch.setattr(ray_node.Node, "__init__", lambda self, params, *a, **k: seen.append(params.setup_worker_path))
    monkeypatch.setenv(choice.CHOICE_ENV, "ray")
    assert choice.use_light_setup_worker() is False
    ray_node.Node(RayParams())
    monkeypatch.delenv(choice.CHOICE_ENV)
    assert choice.use_light_setup_worker() is True and choice.use_light_setup_worker() is True
    ray_node.Node(RayParams())
    ray_node.Node(RayParams(setup_worker_path="/site/own.py"))  # a path Ray was given stays
    assert seen == [None, str(LIGHT_SETUP_WORKER), "/site/own.py"]
