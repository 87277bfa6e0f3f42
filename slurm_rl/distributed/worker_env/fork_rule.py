"""The fork server's one rule (fork_server.py): a fork is used only where it cannot be told
from an exec. Which variables a client's environment may differ in from the one its fork's
interpreter started and imported under, and why a given client's may not.

Imported by fork_server.py and fork_child.py, which run as scripts from this folder; no
slurm_rl import.
"""

# A client's environment may differ from the one its fork's interpreter started and imported
# under only in variables nothing reads before the program does, through os.environ (which the
# fork sets, and /proc/PID/environ with it). Each is observed in a fork by
# tests/unit/test_fork_server.py. Any other difference (TZ, LANG/LC_*, MALLOC_*, GRPC_*, TMPDIR,
# ...: read by libc, the interpreter or a preloaded module at start or import) and it execs.
LATE_NAMES = frozenset(
    (
        # set in the fork as Python would at start (light_setup/forked.py: SET_IN_FORK)
        *("PYTHONPATH", "PYTHONBREAKPOINT", "PYTHONUNBUFFERED"),
        # a worker's place in its group (NeMo RL's, torch.distributed's): read by the program
        *("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"),
        *("AVAILABLE_ADDR_LIST", "AVAILABLE_PORT_LIST", "NRL_WORKER_GROUP"),
        # a shell's own bookkeeping, passed along in a driver's environment
        *("PWD", "OLDPWD", "SHLVL", "_"),
        # what the raylet gives each worker: read by Ray's worker script (its hook) and by the
        # fork's first setproctitle (become: SPT_NOENV keeps /proc/PID/environ as it is)
        *("__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR", "SPT_NOENV"),
    )
)
LATE_PREFIXES = (
    # SLURM's and slurm-rl's own: read by slurm_rl and the program at call time (nothing of
    # slurm_rl is imported before a fork: the server and zygote are scripts of this folder and Ray)
    *("SLURM_", "SLURMD_"),
    # read when torch, CUDA, NCCL or OpenMP load, which no server or zygote has loaded (the test
    # looks at a fork's modules and mapped libraries, and at torch's threads in it)
    *("TORCH_", "CUDA_", "NCCL_", "OMP_"),
)


def late(name: str) -> bool:
    return name in LATE_NAMES or name.startswith(LATE_PREFIXES)


def unlike(base: "dict[str, str]", env: "dict[str, str]", keyed: str = "") -> str:
    """Why a process of environment ENV cannot be a fork of one that started under BASE: the
    variables that differ and may not ("" when none does); those starting with KEYED are equal
    by construction (a zygote per ``RAY_*`` environment) and not looked at."""
    differ = (n for n in set(base) | set(env) if base.get(n) != env.get(n))
    names = sorted(n for n in differ if not late(n) and not (keyed and n.startswith(keyed)))
    return f"env differs ({', '.join(names)})" if names else ""
