"""What a site's SLURM is set up to do, read through ``SlurmClient`` for ``slurm-rl doctor``:
its configuration (``scontrol show config``), the user's associations (``sacctmgr``) and the
SPANK plugins it loads (a container runtime may be one). GPUs per partition come from
``SlurmClient.partitions``."""

from __future__ import annotations

import glob
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UsageError
from .client import SlurmClient


def site_config(client: SlurmClient) -> dict[str, str]:
    """``scontrol show config`` as {key: value} (slurm.conf's and cgroup.conf's settings); {}
    where the controller does not answer."""
    res = client.run(["scontrol", "show", "config"], check=False)
    out: dict[str, str] = {}
    for line in res.stdout.splitlines() if res.returncode == 0 else []:
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class Association:
    account: str
    partition: str  # "" for every partition
    qos: tuple[str, ...]
    default_qos: str


def associations(client: SlurmClient, user: str) -> list[Association] | None:
    """The user's associations on this cluster; None where the site keeps no accounting."""
    try:
        res = client.run(
            ["sacctmgr", "-n", "-P", "show", "assoc", f"user={user}", "format=Account,Partition,QOS,DefaultQOS"],
            check=False,
        )
    except UsageError:  # no sacctmgr on this machine
        return None
    if res.returncode != 0:
        return None
    out = []
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4 and parts[0]:
            out.append(Association(parts[0], parts[1], tuple(q for q in parts[2].split(",") if q), parts[3]))
    return out


@dataclass(frozen=True)
class SpankPlugin:
    path: str
    args: dict[str, str]


def spank_plugins(config: dict[str, str]) -> list[SpankPlugin]:
    """The SPANK plugins of the site's plugstack.conf (and the files it includes), as this
    login node has them."""
    main = config.get("PlugStackConfig", "(null)")
    if main in ("", "(null)"):  # SLURM's default: plugstack.conf beside slurm.conf
        main = str(Path(config.get("SLURM_CONF", "/etc/slurm/slurm.conf")).parent / "plugstack.conf")
    out: list[SpankPlugin] = []
    todo, seen = [main], set()
    while todo:
        path = todo.pop(0)
        if path in seen or not Path(path).is_file():
            continue
        seen.add(path)
        for raw in Path(path).read_text(errors="replace").splitlines():
            words = shlex.split(raw, comments=True)
            if len(words) >= 2 and words[0] == "include":
                todo.extend(sorted(glob.glob(words[1])))
            elif len(words) >= 2 and words[0] in ("required", "optional"):
                args = dict(w.split("=", 1) for w in words[2:] if "=" in w)
                out.append(SpankPlugin(words[1], args))
    return out
