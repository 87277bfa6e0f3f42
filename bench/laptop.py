"""What a command costs from a laptop: `slurm-rl status` and `list` run here (the baseline: this
machine has the lab's SLURM client, as a login node does) and the same with `--login login`
(the lab's login node over ssh, `slurm-lab up --login`): the first over a fresh connection, the
rest over the shared ControlMaster one.

    python bench/laptop.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _lab import LAB, SPEC


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, capture_output=True, env=env, timeout=120, check=True)
    return time.monotonic() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    repeat = p.parse_args().repeat
    key = subprocess.run([str(LAB), "login-key"], capture_output=True, text=True, check=True).stdout.strip()
    home = Path(tempfile.mkdtemp(prefix="srl-bench-"))
    config = home / "ssh_config"
    config.write_text(
        f"Host login\n  User root\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {home}/known_hosts\n  StrictHostKeyChecking accept-new\n"
    )
    env = {**os.environ, "SLURM_RL_SSH_CONFIG": str(config), "SLURM_RL_SSH_DIR": str(home / "cm")}
    spec = home / "spec.json"
    spec.write_text(SPEC.read_text().rstrip().rstrip("}") + f', "login_python": "{sys.executable}"}}')
    cli = [sys.executable, "-m", "slurm_rl"]
    for command in (["status"], ["list"]):
        here = [timed([*cli, *command, "--spec", str(spec)], env) for _ in range(repeat)]
        first = timed([*cli, *command, "--spec", str(spec), "--login", "login"], env)
        shared = [timed([*cli, *command, "--spec", str(spec), "--login", "login"], env) for _ in range(repeat)]
        base = statistics.median(here)
        print(
            f"{' '.join(command):7s} here {base:.2f} s | from a laptop: first {first:.2f} s ({first / base:.2f}x), "
            f"then {statistics.median(shared):.2f} s ({statistics.median(shared) / base:.2f}x, median of {repeat})"
        )
    subprocess.run(
        ["ssh", "-F", str(config), "-o", f"ControlPath={home}/cm/%C", "-O", "exit", "login"], capture_output=True
    )


if __name__ == "__main__":
    main()
