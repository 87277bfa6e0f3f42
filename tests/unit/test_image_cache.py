"""The per-node image cache's script (slurm_rl/runtimes/pyxis_image_cache.sh) against a stand-in enroot
whose config section names a temp data path: prepare once, cached after, a changed key prepared
again, least recently used evicted beyond the budget but never one in use or just used, list and
prune. (The lab test runs it under real Pyxis and enroot.)"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from slurm_rl.runtimes.pyxis import CACHE_SHELL

FAKE_ENROOT = """#!/bin/bash
# ---- BEGIN CONFIG ----
config::export() { export "$1=${!1:-$2}"; }
config::export ENROOT_DATA_PATH "$FAKE_DATA"
# ----- END CONFIG -----
case $1 in
  create) mkdir "$ENROOT_DATA_PATH/$3" && head -c "${FAKE_BYTES:-2000000}" /dev/zero >"$ENROOT_DATA_PATH/$3/blob"
          echo "$3" >>"$FAKE_DATA.creates" ;;
  remove) rm -rf "$ENROOT_DATA_PATH/$3" ;;
esac
"""


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "enroot").write_text(FAKE_ENROOT)
    (bin_dir / "enroot").chmod(0o755)
    data = tmp_path / "data"
    data.mkdir()
    # "meta": META_DIR as the job passes it; the script keeps its files in META_DIR-UID (per user)
    meta = tmp_path / "meta"
    return {
        "bin": bin_dir,
        "data": data,
        "meta": meta,
        "own": Path(f"{meta}-{os.getuid()}"),
        "events": tmp_path / "events.jsonl",
    }


def cache(node: dict[str, Path], *args: str, budget_mb: int = 100) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{node['bin']}:{os.environ['PATH']}",
        "FAKE_DATA": str(node["data"]),
        "SLURMD_NODENAME": "nodeX",
        "ENROOT_DATA_PATH": "/elsewhere",  # the job's own: pyxis drops it, and so does the cache
    }
    if args[0] == "prepare":
        argv = ["prepare", args[1], args[2], str(budget_mb), str(node["meta"]), str(node["events"])]
    else:
        argv = [args[0], str(node["meta"]), *args[1:]]
    return subprocess.run(
        ["bash", "-c", CACHE_SHELL.read_text(), "image-cache", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def events(node: dict[str, Path]) -> list[tuple[str, str]]:
    lines = node["events"].read_text().splitlines() if node["events"].exists() else []
    return [(e["event"], e["key"]) for e in map(json.loads, lines)]


def age(node: dict[str, Path], key: str, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(node["own"] / f"{key}.used", (t, t))


def test_prepared_once_then_cached_and_a_new_version_prepared_again(node: dict[str, Path]) -> None:
    for _ in range(2):
        assert cache(node, "prepare", "/img/a.sqsh", "k1").returncode == 0
    assert events(node) == [("image_prepared", "k1"), ("image_cached", "k1")]
    assert (node["data"] / "pyxis_srl-img-k1" / "blob").exists()
    assert cache(node, "prepare", "/img/a.sqsh", "k2").returncode == 0  # same path, another version
    assert events(node)[-1] == ("image_prepared", "k2")
    assert Path(f"{node['data']}.creates").read_text().split() == ["pyxis_srl-img-k1.tmp", "pyxis_srl-img-k2.tmp"]


def test_a_killed_preparation_is_redone_not_served(node: dict[str, Path]) -> None:
    (node["data"] / "pyxis_srl-img-k1.tmp").mkdir()  # half unpacked, then killed
    (node["data"] / "pyxis_srl-img-k1").mkdir()  # or renamed without its record
    assert cache(node, "prepare", "/img/a.sqsh", "k1").returncode == 0
    assert events(node) == [("image_prepared", "k1")]
    assert (node["data"] / "pyxis_srl-img-k1" / "blob").exists()


def test_least_recently_used_evicted_beyond_the_budget_but_not_a_fresh_one(node: dict[str, Path]) -> None:
    for key in ("old", "mid", "fresh"):
        assert cache(node, "prepare", f"/img/{key}.sqsh", key, budget_mb=100).returncode == 0
    age(node, "old", 3600)
    age(node, "mid", 1800)
    # 4 images of 2 MB, 5 MB budget: the two oldest go; "fresh" (used a minute ago) would be next
    res = cache(node, "prepare", "/img/new.sqsh", "new", budget_mb=5)
    assert res.returncode == 0, res.stderr
    assert [k for e, k in events(node) if e == "image_evicted"] == ["old", "mid"]
    assert sorted(p.name for p in node["data"].iterdir()) == ["pyxis_srl-img-fresh", "pyxis_srl-img-new"]


def test_list_and_prune_report_each_image(node: dict[str, Path]) -> None:
    for key in ("k1", "k2"):
        cache(node, "prepare", f"/img/{key}.sqsh", key)
    listed = json.loads(cache(node, "list").stdout)
    assert listed["node"] == "nodeX" and listed["data_path"] == str(node["data"])
    assert {i["key"]: (i["image"], i["bytes"] // 100_000, i["in_use"]) for i in listed["images"]} == {
        "k1": ("/img/k1.sqsh", 20, False),  # 2 MB and the directory's own few bytes
        "k2": ("/img/k2.sqsh", 20, False),
    }
    pruned = json.loads(cache(node, "prune", "k2").stdout)
    assert pruned["removed"] == ["k2"] and pruned["in_use"] == [] and pruned["freed_bytes"] > 2_000_000
    assert [i["key"] for i in json.loads(cache(node, "list").stdout)["images"]] == ["k1"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts need root")
def test_an_image_a_running_container_uses_is_never_removed(node: dict[str, Path]) -> None:
    cache(node, "prepare", "/img/a.sqsh", "busy")
    rootfs = node["data"] / "pyxis_srl-img-busy"
    # a container: a process whose own mount namespace has the prepared copy mounted
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", f"mount --bind {rootfs} {rootfs} && sleep 60"]
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and 'in_use": true' not in cache(node, "list").stdout:
            time.sleep(0.1)
        pruned = json.loads(cache(node, "prune").stdout)
        assert pruned["removed"] == [] and pruned["in_use"] == ["busy"]
        assert rootfs.is_dir()
    finally:
        holder.kill()
        holder.wait()


class FakeClient:
    def __init__(self, stdout: str, returncode: int = 0) -> None:
        self.stdout, self.returncode = stdout, returncode
        self.argv: list[str] = []

    def run_on_nodes(self, job_id, nodes, argv, timeout_s=60.0, srun_flags=()):  # type: ignore[no-untyped-def]
        self.argv = [*srun_flags, *argv]
        return subprocess.CompletedProcess(argv, self.returncode, self.stdout, "srun: error: Unable to allocate\n")


def test_images_collects_one_report_per_node_and_names_the_silent_ones() -> None:
    from slurm_rl.config.spec import ClusterSpec
    from slurm_rl.core.errors import UsageError
    from slurm_rl.login.images import run_cache_command

    spec = ClusterSpec.model_validate(
        {"cluster_name": "c", "fileroot": "/f", "container_runtime": "pyxis", "python": "python3",
         "cpu_image": "/i.sqsh", "node_local_dir": "/scratch", "account": "acct"}
    )  # fmt: skip
    client = FakeClient('{"node": "n1", "removed": ["k"], "in_use": [], "freed_bytes": 5}\nnoise\n')
    reports, missing = run_cache_command(spec, client, ["n1", "n2"], "prune", ("k",))  # type: ignore[arg-type]
    assert [(r.node, r.removed, r.freed_bytes) for r in reports] == [("n1", ["k"], 5)] and missing == ["n2"]
    assert client.argv[0] == "--account=acct" and client.argv[-3:] == ["prune", "/scratch/slurm-rl-images", "k"]
    with pytest.raises(UsageError, match="Unable to allocate"):
        run_cache_command(spec, FakeClient("", 1), ["n1"], "list")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="keeps no per-node image cache"):
        run_cache_command(spec.model_copy(update={"container_runtime": "none"}), client, ["n1"], "list")  # type: ignore[arg-type]


def test_an_image_being_prepared_holds_up_no_other_image_and_is_not_removed_meanwhile(node: dict[str, Path]) -> None:
    cache(node, "prepare", "/img/a.sqsh", "a")
    cache(node, "prepare", "/img/b.sqsh", "b")
    # another job holds a's lock (preparing it): b's preparation goes on at once, prune skips a
    with (node["own"] / "a.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        t0 = time.monotonic()
        assert cache(node, "prepare", "/img/b.sqsh", "b").returncode == 0
        assert time.monotonic() - t0 < 5
        pruned = json.loads(cache(node, "prune").stdout)
        assert pruned["removed"] == ["b"] and pruned["in_use"] == ["a"], pruned
    assert json.loads(cache(node, "prune").stdout)["removed"] == ["a"]


def test_a_data_path_the_nodes_share_gets_no_cache(node: dict[str, Path]) -> None:
    """enroot's default data path is under $HOME, often NFS: one copy for all nodes would be
    unpacked into by several at once and evicted under running jobs. The step fails, naming it,
    and the job falls back to pyxis' own unpack."""
    (node["bin"] / "stat").write_text('#!/bin/sh\n[ "$1" = -f ] && { echo nfs; exit 0; }\nexec /usr/bin/stat "$@"\n')
    (node["bin"] / "stat").chmod(0o755)
    res = cache(node, "prepare", "/img/a.sqsh", "a")
    assert res.returncode == 1 and f"data path {node['data']} is on nfs" in res.stderr, res.stderr
    assert "ENROOT_DATA_PATH" in res.stderr and list(node["data"].iterdir()) == []


def test_the_bookkeeping_is_per_user_and_one_somebody_else_made_is_refused(node: dict[str, Path]) -> None:
    assert cache(node, "prepare", "/img/a.sqsh", "a").returncode == 0
    assert node["own"].stat().st_mode & 0o777 == 0o700 and (node["own"] / "a.json").exists()
    if os.geteuid() != 0:
        return  # planting a dir of another uid needs root (CI runs as root)
    shutil.rmtree(node["own"])
    node["own"].mkdir(mode=0o777)
    os.chown(node["own"], 54321, 54321)
    res = cache(node, "prepare", "/img/a.sqsh", "a")
    assert res.returncode == 1 and "is not this user's" in res.stderr
