"""`slurm-rl list` on a machine without SLURM (a laptop): each named cluster reached only through
its login node is asked there (`list --json` with that cluster's spec, over the entry point's
forwarder), all at once; their rows join this machine's own, newest first, each with its
cluster's name. A login node that does not answer is one line on stderr; the others' jobs still
show."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import click

from ...core.errors import SlurmRlError

if TYPE_CHECKING:
    from ...config.clusters import Cluster

OLDER = re.compile(r"^\((\d+) older job\(s\) not shown")
Rows = list[dict[str, str]]


def login_only() -> dict[str, tuple[Cluster, str]]:
    """The named clusters this machine reaches only through their login nodes (no SLURM here,
    an entry point that forwards), each with its spec's cluster_name; {} anywhere else."""
    from ...config.clusters import cluster_spec, load_clusters
    from ...slurm.runner import client_installed
    from .job_command import Forwarder

    if click.get_current_context().find_object(Forwarder) is None or client_installed():
        return {}
    out = {}
    for name, entry in load_clusters().items():
        if entry.login:
            try:
                out[name] = (entry, cluster_spec(name).cluster_name)
            except SlurmRlError:
                out[name] = (entry, "")  # asked all the same: the login node's answer names the problem
    return out


def through_logins(
    rows: Rows, remote: dict[str, tuple[Cluster, str]], opts: dict[str, Any], older: int, command: Any = None
) -> tuple[Rows, list[str], int]:
    """``rows`` with every login-only cluster's; the lines of those that did not answer, and how
    many older jobs are left out in all (``opts``: list's --last and --all; ``command``: the list
    command, where another command asks: job_remote.py)."""
    from .job_command import Forwarder

    ctx = click.get_current_context()
    forwarder = ctx.find_object(Forwarder)
    assert forwarder is not None

    def ask(name: str) -> tuple[Rows, str, int]:
        entry, cluster = remote[name]
        typed = {**opts, "spec_flag": entry.spec, "as_json": True, "only_spec": True}
        try:
            rc, out, err = forwarder.capture("list", command or ctx.command, typed, str(entry.login))
        except (SlurmRlError, OSError) as exc:
            why = " ".join(str(exc).split())[:200]
            return [], f"cluster {name}: does not answer ({why}); its jobs are not shown", 0
        said = [ln for ln in err.splitlines() if ln.strip()]
        if rc != 0:
            why = (said[-1] if said else f"exit {rc}").removeprefix("slurm-rl: error: ")
            return [], f"cluster {name}: does not answer through {entry.login} ({why}); its jobs are not shown", 0
        got = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        mine = [{**r, "cluster": name} for r in got if r.get("cluster_name") == cluster]
        left = sum(int(m.group(1)) for m in map(OLDER.match, said) if m)
        silent = [f"cluster {name}: {ln.split(': ', 1)[-1]}" for ln in said if "does not answer" in ln]
        return mine, "; ".join(silent), left

    with ThreadPoolExecutor(max_workers=min(16, len(remote))) as pool:
        answers = list(pool.map(ask, sorted(remote)))
    theirs = [r for got, _, _ in answers for r in got]
    seen = {(r["cluster_name"], r["job"]) for r in theirs}  # a job dir this machine sees too: theirs
    mine = [r for r in rows if (r.get("cluster_name"), r["job"]) not in seen]
    merged = sorted(mine + theirs, key=lambda r: float(r.get("t") or 0), reverse=True)
    shown = merged if opts.get("every") else merged[: int(opts["last"])]
    older += sum(n for _, _, n in answers) + len(merged) - len(shown)
    return shown, [line for _, line, _ in answers if line], older
