"""Whether a job's workers are forks of their node's fork server, and whether each behaves as
an exec'd Python of its environment would: per node, two actors without env_vars and one given
TZ, MALLOC_ARENA_MAX and LANG; each reports its facts and those of a fresh `python -c` started
with its own environment (the exec'd reference). Writes `<job dir>/fork_probe.json`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import ray

from slurm_rl.distributed import init_ray

FACTS = (
    "import json, locale, os, sys, time; print(json.dumps({'tz': time.strftime('%Z', time.localtime(0)),"
    " 'tzname': list(time.tzname), 'ctype': locale.setlocale(locale.LC_CTYPE), 'utf8': sys.flags.utf8_mode,"
    " 'fsenc': sys.getfilesystemencoding(), 'hash': hash('slurm-rl'), 'seed': os.environ.get('PYTHONHASHSEED'),"
    " 'malloc': os.environ.get('MALLOC_ARENA_MAX'), 'lang': os.environ.get('LANG')}))"
)
GIVEN = {"TZ": "JST-9", "MALLOC_ARENA_MAX": "2", "LANG": "C"}  # (the nodes have LANG=C.UTF-8)


@ray.remote(num_cpus=0)
class Probe:
    def facts(self) -> dict:
        import psutil

        out: list[str] = []
        exec(FACTS, {"print": out.append})  # the same facts, of this process
        mine = json.loads(out[0])
        # the reference starts with the environment this process was started with (its
        # /proc/PID/environ), not os.environ: Python's locale coercion (PEP 538) adds LC_CTYPE to it
        with open("/proc/self/environ", "rb") as f:
            started = dict(v.split("=", 1) for v in f.read().decode().split("\0") if "=" in v)
        started.pop("SLURM_RL_FORK_ENV_ROOM", None)
        execd = subprocess.run([sys.executable, "-c", FACTS], capture_output=True, text=True, check=True, env=started)
        parent = psutil.Process(os.getppid()).cmdline()
        log = Path(ray._private.worker.global_worker.node.get_logs_dir_path()) / "slurm_rl_fork_server.log"
        return {
            "node": os.uname().nodename,
            "forked": any(a.endswith("fork_server.py") for a in parent),
            "mine": mine,
            "execd": json.loads(execd.stdout),
            "server_log": log.read_text() if log.exists() else None,
        }


def main() -> None:
    init_ray()
    strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
    probes = []
    for node in (n for n in ray.nodes() if n["Alive"]):
        on = strategy(node["NodeID"], soft=False)
        probes += [("plain", Probe.options(scheduling_strategy=on).remote()) for _ in range(2)]
        given = Probe.options(scheduling_strategy=on, runtime_env={"env_vars": GIVEN}).remote()
        probes.append(("given", given))
    facts = [{"kind": kind, **ray.get(p.facts.remote())} for kind, p in probes]
    Path(os.environ["SLURM_RL_JOB_DIR"], "fork_probe.json").write_text(json.dumps(facts, indent=1))
    print(json.dumps([(f["kind"], f["node"], f["forked"], f["mine"]["hash"]) for f in facts]), flush=True)


if __name__ == "__main__":
    main()
