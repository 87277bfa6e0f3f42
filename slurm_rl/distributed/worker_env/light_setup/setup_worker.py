"""Ray's ``setup_worker.py``, without importing Ray: what the raylet runs in front of every
worker process whose task or actor has a runtime_env (env_vars, py_executable, a container...).

Ray's own script imports Ray (its logging, runtime-env context and protobuf modules) only to
read two arguments, set the runtime env's variables and exec the worker: ~1.2 CPU-s and ~1.2 s
of wall before every such worker starts (measured on the lab, Ray 2.60). This one does the same
with the standard library: the same arguments, the same expansion of ``${VAR}`` in values, the
same command (``bash -c "<prefix> exec <python> <worker args>"``). Workers of other languages
(Java, C++) go to Ray's own script unchanged.

The file keeps Ray's name: the raylet recognises the setup script by it, and leaves it out for
workers without a runtime_env. Started as a script (``python .../setup_worker.py``): it imports
nothing of slurm_rl and nothing from its own folder.
"""

import json
import os
import re
import shlex
import sys

CONTEXT = "--serialized-runtime-env-context"
LANGUAGE = "--language"
UNSET_VAR = re.compile(r"\$\{[A-Z0-9_]+\}")


def split_args(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """(our two options, every other argument in order), as Ray's argparse reads them."""
    ours: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in (CONTEXT, LANGUAGE):
            if not eq and i + 1 < len(argv):
                i += 1
                value = argv[i]
            ours[name] = value
        else:
            rest.append(arg)
        i += 1
    return ours, rest


def rays_own_script() -> str:
    """Ray's setup_worker.py, found without importing Ray."""
    import importlib.util

    spec = importlib.util.find_spec("ray")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("setup_worker: Ray is not importable by " + sys.executable)
    return os.path.join(next(iter(spec.submodule_search_locations)), "_private", "workers", "setup_worker.py")


def main(argv: list[str]) -> None:
    ours, rest = split_args(argv)
    if ours.get(LANGUAGE, "PYTHON") != "PYTHON":
        script = rays_own_script()
        os.execv(sys.executable, [sys.executable, script, *argv])
    context = json.loads(ours.get(CONTEXT) or "{}")
    for key, value in (context.get("env_vars") or {}).items():
        os.environ[key] = UNSET_VAR.sub("", os.path.expandvars(value))
    forked = [i for i, a in enumerate(rest[:2]) if os.path.basename(a) == "forked.py"]
    if forked and (context.get("override_worker_entrypoint") or context.get("command_prefix")):
        rest = rest[forked[0] + 2 :]  # [-S] forked.py --via=...: with these, Ray's own command
    if context.get("override_worker_entrypoint") and rest:
        rest[0] = context["override_worker_entrypoint"]
    python = context.get("py_executable") or sys.executable
    cmd = [*(context.get("command_prefix") or []), "exec", python, *(shlex.quote(a) for a in rest)]
    if "DYLD_LIBRARY_PATH" in os.environ:  # as Ray does for macOS, where exec drops it
        cmd.insert(0, "DYLD_LIBRARY_PATH=" + os.environ["DYLD_LIBRARY_PATH"])
    os.execvp("bash", ["bash", "-c", " ".join(cmd)])


if __name__ == "__main__":
    main(sys.argv[1:])
