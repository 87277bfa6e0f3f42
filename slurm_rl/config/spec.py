"""The cluster spec: schema, loading, defaults and one-line validation errors.

A spec is a JSON file describing a site (ReaL's fields plus what a Ray-on-SLURM launcher needs).
It is found via ``--spec PATH``, else ``CLUSTER_SPEC_PATH``, else a built-in local default whose
fileroot is ``~/.cache/slurm_rl``. ``load_spec`` returns a frozen ``ClusterSpec`` or raises
``SpecError`` whose message is one line: the field, the bad value, and the fix.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from ..core.errors import SpecError
from ..core.fields import (
    FieldProblem,
    NetworkInterface,
    RegexTable,
    first_match,
)
from ..runtimes import NAMES, runtime_of
from .site_defaults import SPEC_CONFIG, SiteDefaults
from .spec_errors import one_line

SPEC_ENV_VAR = "CLUSTER_SPEC_PATH"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Ray nests <dir>/srl-<job>/r/session_<date>_<pid>/sockets/raylet (about 72 characters) below it
NODE_LOCAL_DIR_MAX = 30
_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Variables of the spec's env whose values must never be written into the batch script
SECRET_NAME = re.compile(r"TOKEN|KEY|PASSWORD|SECRET|PASSWD|CREDENTIAL", re.IGNORECASE)


class ClusterSpec(SiteDefaults):
    """A resolved, validated cluster spec. Frozen: resolve once, pass around. Its site defaults
    (partition, account, qos, mem, ..., python) are the job options' own (site_defaults.py)."""

    model_config = SPEC_CONFIG

    if TYPE_CHECKING:  # the site defaults' attributes, made from the options at import

        def __getattr__(self, name: str) -> Any: ...

    cluster_type: Literal["slurm", "local", "ray"] = "slurm"
    cluster_name: str
    fileroot: str
    default_mount: str = ""
    node_type_from_node_name: RegexTable = Field(default_factory=dict)
    gpu_type_from_node_name: RegexTable = Field(default_factory=dict)
    cpu_image: str | None = None
    gpu_image: str | None = None
    node_name_prefix: str | None = None  # set: every node of a job must carry it (checked)
    # on a machine with several clusters' SLURM clients: this cluster's slurm.conf, the SLURM_CONF
    # of every SLURM command slurm-rl runs for it (unset: the machine's own)
    slurm_conf: str | None = None
    container_runtime: str = "none"  # a name in slurm_rl/runtimes (NAMES)
    # pyxis and a squashfs image: each node unpacks it once per image version and every container
    # starts from that copy under its own copy-on-write layer; at most this many GB per node (LRU)
    image_cache: bool = True
    image_cache_gb: float = Field(default=100.0, gt=0)
    # from a laptop: the login node (user@host or an ~/.ssh/config alias) that runs every command
    # over ssh, and the interpreter there that has slurm-rl (default: python, else python3)
    login: str | None = Field(default=None, pattern=r"^[^\s'\"]+$")
    login_python: str | None = Field(default=None, pattern=r"^\S+$")
    # node-local disk (not RAM) for each job's Ray temp dir, logs and object spilling; mounted
    # into containers at the same path (enroot's /tmp is a tmpfs)
    node_local_dir: str = "/tmp"
    # the interface (ib0) or network (10.78.0.0/16) Ray, NCCL and gloo use on multi-NIC nodes
    network_interface: NetworkInterface | None = None
    setup: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    ray_head_node_address: str | None = None  # cluster_type "ray": NeMo Gym's name for it
    ray_auth_token_file: str | None = None  # cluster_type "ray": its token, if it uses token auth

    @field_validator("ray_head_node_address")
    @classmethod
    def _ray_address(cls, v: str | None) -> str | None:
        if v is None:
            return v
        host, _, port = v.removeprefix("ray://").rpartition(":")
        if not host or not port.isdigit():
            raise ValueError("is not HOST:PORT")
        return v  # ray://HOST:PORT stays: Ray Client

    @field_validator("container_runtime")
    @classmethod
    def _runtime(cls, v: str) -> str:
        if v not in NAMES:
            raise ValueError("is not a container runtime slurm-rl knows")
        return v

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, v: str) -> str:
        if not _CLUSTER_NAME.match(v):
            raise ValueError("not a valid name")
        return v

    @field_validator("fileroot")
    @classmethod
    def _fileroot(cls, v: str) -> str:
        expanded = os.path.expanduser(os.path.expandvars(v))
        if not v.strip():
            raise ValueError("is empty")
        if not os.path.isabs(expanded):
            raise ValueError("is a relative path")
        if ".." in expanded.split("/"):  # /a/link/../b is not /a/b when link is a symlink: refuse
            raise ValueError(f"contains '..'; write the path without it, e.g. {os.path.normpath(expanded)!r}")
        return os.path.normpath(expanded)

    @field_validator("default_mount")
    @classmethod
    def _mounts(cls, v: str) -> str:
        for entry in filter(None, (e.strip() for e in v.split(","))):
            parts = entry.split(":")
            if len(parts) not in (2, 3) or not all(p.startswith("/") for p in parts[:2]):
                raise ValueError(f"entry {entry!r} is not /src:/dst[:opts]")
        return v

    @field_validator("node_name_prefix")
    @classmethod
    def _prefix(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^[A-Za-z0-9_.-]+$", v):
            raise ValueError("is not a node name prefix")
        return v

    @field_validator("python")
    @classmethod
    def _python(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("is empty")
        return v

    @field_validator("slurm_conf")
    @classmethod
    def _slurm_conf(cls, v: str | None) -> str | None:
        if v is not None and not os.path.isabs(v):
            raise ValueError("is a relative path; give the absolute path of the cluster's slurm.conf")
        return v

    @field_validator("node_local_dir")
    @classmethod
    def _node_local_dir(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("is a relative path")
        v = os.path.normpath(v)
        if len(v) > NODE_LOCAL_DIR_MAX:
            raise ValueError(
                f"is {len(v)} characters; Ray's socket paths below it must fit in 107 bytes, "
                f"so use a path of at most {NODE_LOCAL_DIR_MAX}"
            )
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not _ENV_NAME.match(name):
                raise ValueError(f"variable name {name!r} is not a valid shell name")
        return v

    @model_validator(mode="after")
    def _ray_cluster(self) -> ClusterSpec:
        if self.cluster_type == "ray" and not self.ray_head_node_address:
            raise FieldProblem("ray_head_node_address", None, 'is required with cluster_type "ray"')
        if self.ray_head_node_address and self.cluster_type != "ray":
            raise FieldProblem("cluster_type", self.cluster_type, 'must be "ray" when ray_head_node_address is set')
        return self

    @model_validator(mode="after")
    def _images(self) -> ClusterSpec:
        if not runtime_of(self.container_runtime).contained:
            return self
        needs = f"is required with container_runtime {self.container_runtime!r}"
        if self.python is None:
            why = f'the interpreter inside the image (e.g. "python3"), not this machine\'s {sys.executable}'
            raise FieldProblem("python", None, f"{needs}: {why}")
        if not self.cpu_image:
            raise FieldProblem("cpu_image", None, needs)
        if self.gpus_per_node > 0 and not self.gpu_image:
            raise FieldProblem("gpu_image", None, f"{needs} and gpus_per_node > 0")
        return self

    # ---- derived views -------------------------------------------------------------------
    @property
    def public_env(self) -> dict[str, str]:
        return {k: v for k, v in self.env.items() if not SECRET_NAME.search(k)}

    @property
    def secret_env(self) -> dict[str, str]:
        """Variables whose names look secret: they reach the nodes from a 0600 file in the job
        dir, never through sbatch.sh (SLURM keeps a copy), spec.json, the manifest or logs."""
        return {k: v for k, v in self.env.items() if SECRET_NAME.search(k)}

    def redacted_json(self) -> str:
        """to_json() with secret values replaced: the spec.json record of a job dir."""
        data = json.loads(self.to_json())
        data["env"] = {k: ("<secret: in secrets.env>" if k in self.secret_env else v) for k, v in self.env.items()}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @property
    def mounts(self) -> list[str]:
        """default_mount as a list, without empty entries."""
        return [e.strip() for e in self.default_mount.split(",") if e.strip()]

    def node_type(self, node_name: str) -> str | None:
        """The node type of a node name (first matching regex), None if nothing matches."""
        return first_match(self.node_type_from_node_name, node_name)

    def gpu_type_of(self, node_name: str) -> str | None:
        return first_match(self.gpu_type_from_node_name, node_name)

    def check_node_names(self, names: list[str]) -> None:
        """Raise SpecError for a node without the spec's node_name_prefix, or one that matches
        no node type regex (when types are defined): the same full match the job's Ray uses."""
        for name in names:
            if self.node_name_prefix and not name.startswith(self.node_name_prefix):
                raise SpecError(
                    f"node_name_prefix: node {name!r} does not start with {self.node_name_prefix!r}; "
                    f"fix node_name_prefix or remove it"
                )
        if not self.node_type_from_node_name:
            return
        for name in names:
            if self.node_type(name) is None:
                patterns = ", ".join(repr(p) for p in self.node_type_from_node_name)
                raise SpecError(
                    f"node_type_from_node_name: node {name!r} matches none of {patterns}; add a regex that matches it"
                )

    def to_json(self) -> str:
        return json.dumps(self.model_dump(), indent=2, sort_keys=True) + "\n"


def default_local_spec() -> ClusterSpec:
    """The spec used when neither --spec nor CLUSTER_SPEC_PATH is given: embedded local Ray."""
    return ClusterSpec(cluster_type="local", cluster_name="local", fileroot=str(Path.home() / ".cache" / "slurm_rl"))


def parse_spec(data: Any, source: str = "spec") -> ClusterSpec:
    """Validate a decoded JSON object into a ClusterSpec, or raise a one-line SpecError."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: the spec must be a JSON object {{...}}, got {type(data).__name__}")
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(one_line(exc, data, source, list(ClusterSpec.model_fields))) from None


def load_spec_file(path: str | os.PathLike[str]) -> ClusterSpec:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"spec {str(p)!r} does not exist or is not a file; pass --spec PATH or set {SPEC_ENV_VAR}")
    try:
        data = json.loads(p.read_text())
    except UnicodeDecodeError:
        raise SpecError(f"{p}: not UTF-8 text; save the spec as UTF-8 JSON") from None
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; fix the JSON syntax"
        ) from None
    return parse_spec(data, str(p))


def resolve_spec_path(cli_path: str | None, environ: dict[str, str] | None = None) -> str | None:
    """--spec wins over CLUSTER_SPEC_PATH; None means the local default."""
    env = os.environ if environ is None else environ
    return cli_path or env.get(SPEC_ENV_VAR) or None


def load_spec(cli_path: str | None = None, environ: dict[str, str] | None = None) -> ClusterSpec:
    path = resolve_spec_path(cli_path, environ)
    return load_spec_file(path) if path else default_local_spec()
