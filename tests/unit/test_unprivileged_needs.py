"""What a runtime needs of a node for a user who is not root, judged one line each with the fix
(runtimes/unprivileged.py), from the bare-node shell's own line."""

from __future__ import annotations

import json
import subprocess

from slurm_rl.runtimes import runtime_of
from slurm_rl.runtimes.unprivileged import NEEDS_PREFIX, NEEDS_SHELL, parse_needs

WRITABLE = {"ENROOT_RUNTIME_PATH": ["/run/enroot/user-1000", True], "ENROOT_CACHE_PATH": ["/c", True],
            "ENROOT_DATA_PATH": ["/d", True]}  # fmt: skip


def line(**fields: object) -> str:
    node = {"uid": 1000, "userns": True, "max_userns": "15000", "fuse": True,
            "enroot_paths": WRITABLE, **fields}  # fmt: skip
    return NEEDS_PREFIX + json.dumps(node)


def test_pyxis_names_user_namespaces_and_each_enroot_path_a_user_cannot_write() -> None:
    pyxis = runtime_of("pyxis")
    assert [c.status for c in pyxis.needs_checks(line())] == ["ok", "ok"]
    off = pyxis.needs_checks(line(userns=False, max_userns="0"))
    assert off[0].name == "user namespaces" and off[0].status == "fail"
    assert "max_user_namespaces = 0" in off[0].found and "user.max_user_namespaces > 0" in off[0].fix
    data = {**WRITABLE, "ENROOT_DATA_PATH": ["/var/lib/enroot/data", False]}
    bad = [c for c in pyxis.needs_checks(line(enroot_paths=data)) if c.status == "fail"]
    assert len(bad) == 1 and "ENROOT_DATA_PATH is /var/lib/enroot/data" in bad[0].found and "per-user" in bad[0].fix
    assert pyxis.needs_checks(line(uid=0, userns=False)) == []  # root needs none of it


def test_apptainer_warns_when_the_user_cannot_mount_the_image_with_fuse() -> None:
    apptainer = runtime_of("apptainer")
    said = 'SLURM_RL_RUNTIME {"found": true, "version": "1.4.5", "userns": true, "setuid": false, "root": false}'
    checks = apptainer.probe_checks(said + "\n" + line(fuse=False))
    assert [(c.name, c.status) for c in checks] == [("apptainer", "ok"), ("fuse", "warn")]
    assert "/dev/fuse is not open to uid 1000: each job extracts the image once per node" in checks[1].found
    assert "0666" in checks[1].fix and "fuse3" not in checks[1].fix  # measured: squashfuse needs no fusermount3
    setuid = said.replace('"setuid": false', '"setuid": true')
    assert [c.name for c in apptainer.probe_checks(setuid + "\n" + line(fuse=False))] == ["apptainer"]


def test_the_bare_node_shell_says_what_this_machine_has() -> None:
    out = subprocess.run(["bash", "-c", NEEDS_SHELL], capture_output=True, text=True, timeout=30,
                         env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    node = parse_needs(out.stdout)
    assert node is not None, out.stdout + out.stderr
    assert isinstance(node["userns"], bool) and isinstance(node["fuse"], bool) and node["uid"] >= 0
