"""The clusters a user submits to, by name (``slurm-rl clusters``, ``--cluster NAME``): a JSON file
where users keep such settings, ``$SLURM_RL_CLUSTERS``, else
``$XDG_CONFIG_HOME/slurm_rl/clusters.json`` (``~/.config/slurm_rl/clusters.json``), written
whole (atomically) by ``clusters add`` and ``clusters remove``. Each name holds its spec's
absolute path and, optionally, the login host that reaches it; how this machine reaches the
cluster's SLURM otherwise is the spec's (``slurm_conf``). Without the file nothing changes."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.errors import SpecError, UsageError
from ..core.events import write_atomic
from ..core.job_env import Settings
from .spec import ClusterSpec, load_spec_file

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
RESERVED = ("auto", "first")  # --cluster auto / first choose among them


class Cluster(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: str  # absolute path of its cluster spec
    login: str | None = Field(default=None, pattern=r"^[^\s'\"]+$")  # [user@]host that runs its commands


class ClustersFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    clusters: dict[str, Cluster] = Field(default_factory=dict)


def clusters_path(settings: Settings | None = None) -> Path:
    s = settings or Settings.current()
    if s.clusters:
        return Path(s.clusters)
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "slurm_rl" / "clusters.json"


def load_clusters(path: Path | None = None) -> dict[str, Cluster]:
    """The named clusters ({} where there is no file); a broken file is one line naming it."""
    p = path or clusters_path()
    try:
        text = p.read_text()
    except FileNotFoundError:
        return {}
    try:
        return dict(ClustersFile.model_validate(json.loads(text)).clusters)
    except (ValueError, ValidationError) as exc:
        first = str(exc).strip().splitlines()[0][:200]
        raise UsageError(
            f"{p}: not a clusters file ({first}); fix it or remove it and `slurm-rl clusters add` again"
        ) from None


def save_clusters(clusters: dict[str, Cluster], path: Path | None = None) -> Path:
    p = path or clusters_path()
    data = ClustersFile(clusters=dict(sorted(clusters.items()))).model_dump(exclude_none=True)
    write_atomic(p, json.dumps(data, indent=2) + "\n")
    return p


def add_cluster(name: str, spec_path: str, login: str | None = None, path: Path | None = None) -> Cluster:
    """Name a cluster: its spec must load now (a bad one is its own one-line error)."""
    if not NAME.match(name) or name in RESERVED:
        why = f"'{name}' is reserved (--cluster {name} chooses among the clusters)" if name in RESERVED else ""
        raise UsageError(
            f"clusters add {name!r}: {why or 'not a name'}; use a name of letters, digits, '.', '_' or '-'"
        )
    clusters = load_clusters(path)
    if name in clusters:
        raise UsageError(
            f"clusters add {name}: a cluster of that name is there (spec {clusters[name].spec}); "
            f"`slurm-rl clusters remove {name}` first"
        )
    load_spec_file(spec_path)
    try:
        entry = Cluster(spec=os.path.abspath(spec_path), login=login)
    except ValidationError:
        raise UsageError(f"--login {login!r}: not [USER@]HOST; give the login node as ssh reaches it") from None
    save_clusters({**clusters, name: entry}, path)
    return entry


def remove_cluster(name: str, path: Path | None = None) -> None:
    clusters = load_clusters(path)
    if name not in clusters:
        raise UsageError(f"clusters remove {name}: no cluster of that name; {known(clusters, path)}")
    save_clusters({k: v for k, v in clusters.items() if k != name}, path)


def known(clusters: dict[str, Cluster], path: Path | None = None) -> str:
    if not clusters:
        return f"there are none in {path or clusters_path()} (`slurm-rl clusters add NAME SPEC`)"
    return f"the clusters are {', '.join(sorted(clusters))} (`slurm-rl clusters`)"


def cluster_entry(name: str, path: Path | None = None) -> Cluster:
    clusters = load_clusters(path)
    if name not in clusters:
        raise UsageError(f"--cluster {name}: no cluster of that name; {known(clusters, path)}")
    return clusters[name]


def cluster_spec(name: str, path: Path | None = None) -> ClusterSpec:
    """The spec of a named cluster; one that no longer loads names the cluster and the fix."""
    entry = cluster_entry(name, path)
    try:
        return load_spec_file(entry.spec)
    except SpecError as exc:
        raise SpecError(
            f"cluster {name}: {exc}; fix the spec, or `slurm-rl clusters remove {name}` and add it again"
        ) from None
