"""How an unprivileged Apptainer start without /dev/fuse opens the image (OPEN_IMAGE_SHELL): the
first start of a job on a node extracts it into the job's node-local dir, every later one (an
attach, a member) runs that tree, and a failed extraction falls back to Apptainer's own
per-start extraction. The shell runs for real, with a stand-in `apptainer` and `id` (an ordinary
user's uid) and a /dev/fuse that does not exist; the lab's Apptainer tests run the real one."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from slurm_rl.runtimes.apptainer import OPEN_IMAGE_SHELL

FAKE_APPTAINER = """#!/bin/sh
echo "$*" >> "$LOG"
case "$1 $2" in
  "buildcfg LIBEXECDIR") echo /nonexistent; exit 0 ;;
  "-q build") [ -n "$FAIL_BUILD" ] && exit 1; mkdir -p "$5/opt"; [ -z "$SLOW_BUILD" ] || exec sleep 300; exit 0 ;;
esac
echo "UNSQUASH=${APPTAINER_UNSQUASH:-} TMPDIR=$APPTAINER_TMPDIR ARGS=$*"
"""


def start_argv(tmp_path: Path, node_dir: Path, *command: str) -> tuple[list[str], dict[str, str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("apptainer", FAKE_APPTAINER), ("id", "#!/bin/sh\necho 1000\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    shell = OPEN_IMAGE_SHELL.replace("/dev/fuse", str(tmp_path / "no-fuse"))
    argv = ["sh", "-c", shell, "slurm-rl-apptainer", f"--node-temp={node_dir}", "--image=/i.sqsh"]
    argv += ["apptainer", "exec", "--bind", "/j:/j", "/i.sqsh", *command]
    return argv, {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(tmp_path / "log")}


def start(tmp_path: Path, node_dir: Path, *command: str, fail_build: bool = False) -> str:
    argv, env = start_argv(tmp_path, node_dir, *command)
    if fail_build:
        env["FAIL_BUILD"] = "1"
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30, check=True)
    return res.stdout.strip()


def builds(tmp_path: Path) -> int:
    return sum(" build " in line for line in (tmp_path / "log").read_text().splitlines())


def test_the_image_is_extracted_once_per_node_and_job_and_every_start_runs_it(tmp_path: Path) -> None:
    node_dir = tmp_path / "srl-7"
    first = start(tmp_path, node_dir, "python", "-c", "print('/i.sqsh')")
    tree = node_dir / "image"
    assert first == f"UNSQUASH= TMPDIR={node_dir} ARGS=exec --bind /j:/j {tree} python -c print('/i.sqsh')"
    assert tree.is_dir() and (tree / "opt").is_dir() and builds(tmp_path) == 1
    assert oct(node_dir.stat().st_mode & 0o777) == "0o700"  # the user's own, like the job's node dir
    attach = start(tmp_path, node_dir, "ray", "status")  # an attach: the same tree, no extraction
    assert attach.endswith(f"{tree} ray status") and builds(tmp_path) == 1
    assert [p.name for p in node_dir.iterdir()] == ["image"]  # no half-made tree left beside it


def test_a_failed_extraction_leaves_nothing_and_apptainer_extracts_as_it_does(tmp_path: Path) -> None:
    node_dir = tmp_path / "srl-8"
    said = start(tmp_path, node_dir, "hostname", fail_build=True)
    assert said == f"UNSQUASH=1 TMPDIR={node_dir} ARGS=exec --bind /j:/j /i.sqsh hostname"
    assert list(node_dir.iterdir()) == []


def test_a_signal_mid_extraction_leaves_no_node_dir(tmp_path: Path) -> None:
    """A time limit or a cancel while a loaded node still extracts (seen on a busy CI machine: a
    one-minute job's extraction took most of its minute): no bootstrap has started to clean up,
    so the start itself removes the half-made tree and the node dir it made."""
    node_dir = tmp_path / "srl-9"
    argv, env = start_argv(tmp_path, node_dir, "hostname")
    proc = subprocess.Popen(argv, env={**env, "SLOW_BUILD": "1"}, stdout=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 20
        while not list(node_dir.glob("image.*/tree/opt")) and time.monotonic() < end:
            time.sleep(0.05)
        assert list(node_dir.glob("image.*/tree/opt")), "the extraction never began"
        proc.send_signal(signal.SIGTERM)  # SLURM's, to the step's shell
        assert proc.wait(timeout=20) == 143
    finally:
        proc.kill()
    assert not node_dir.exists(), list(node_dir.rglob("*"))
    assert "hostname" not in (proc.stdout.read() if proc.stdout else "")  # nothing ran after it
