"""A spec's validation errors as one line each: the field, the bad value, and the fix."""

from __future__ import annotations

import difflib
import json
from typing import Any

from pydantic import ValidationError

from ..core.fields import FieldProblem
from ..runtimes import NAMES

# What to tell the user for each field when its value is wrong.
FIXES: dict[str, str] = {
    "cluster_type": 'use "slurm", "local" or "ray" (an existing Ray cluster: also set ray_head_node_address)',
    "ray_head_node_address": 'use "HOST:PORT" of the Ray head\'s GCS (what `ray start --head` printed), '
    'with cluster_type "ray"',
    "ray_auth_token_file": "use the path of a file holding the cluster's Ray token (RAY_AUTH_TOKEN_PATH), or null",
    "cluster_name": "use letters, digits, '.', '_' or '-', e.g. \"my-cluster\"",
    "fileroot": 'use an absolute path on the shared filesystem, e.g. "/lustre/$USER/slurm_rl"',
    "default_mount": 'use comma-separated "/src:/dst[:ro]" entries with absolute paths',
    "node_type_from_node_name": 'use an object of {"regex": "type"}, e.g. {"gpu\\\\d+": "gpu"}',
    "gpu_type_from_node_name": 'use an object of {"regex": "gpu type"}, e.g. {"gpu\\\\d+": "h100"}',
    "cpu_image": 'set a container image for CPU nodes, or container_runtime "none"',
    "gpu_image": 'set a container image for GPU nodes, or container_runtime "none"',
    "node_name_prefix": 'use the prefix of your node names, e.g. "NODE"',
    "partition": "use a partition name from `sinfo -s`, or null",
    "head_partition": "use a CPU partition for a dedicated Ray head (a heterogeneous job), or null",
    "account": "use an account name from `sacctmgr show assoc user=$USER`, or null",
    "gpus_per_node": "use an integer >= 0",
    "cpus_per_node": "use an integer >= 1, or null to use what SLURM allocates",
    "container_runtime": "use one of " + ", ".join(f'"{name}"' for name in NAMES),
    "python": 'use the python on the nodes (inside the image with a container runtime), e.g. "python3"',
    "node_local_dir": 'use a short absolute path on node-local disk, e.g. "/tmp" or "/local/scratch"',
    "setup": "use a list of shell lines",
    "env": 'use an object of {"NAME": "value"} with string values',
    "qos": "use a QOS name from `sacctmgr show qos`, or null",
    "constraint": 'use node features as sbatch --constraint takes them, e.g. "a100&ib", or null',
    "mem": 'use a SLURM memory size per node, e.g. "64G", or null',
    "mem_per_cpu": 'use a SLURM memory size per CPU, e.g. "4G", or null (not with mem)',
    "gres": 'use a GRES list, e.g. "gpu:8", or null',
    "reservation": "use a reservation name from `scontrol show reservation`, or null",
    "sbatch_args": 'use a list of sbatch options, e.g. ["--licenses=fs:1"]',
    "srun_args": 'use a list of srun options for the node step, e.g. ["--mpi=none"]',
    "exclusive": "use true or false",
}


def _describe(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def one_line(exc: ValidationError, data: dict[str, Any], source: str, fields: list[str]) -> str:
    """The first validation error as one line: the field, the bad value, and the fix."""
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    ctx_error = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_error, FieldProblem):
        field = ctx_error.field
        return f"{source}: {field}: {ctx_error.problem}; {FIXES.get(field, '')}".rstrip("; ")
    if err["type"] == "extra_forbidden":
        key = loc[0]
        close = difflib.get_close_matches(key, fields, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "valid keys: " + ", ".join(fields)
        return f"{source}: unknown key {key!r}; {hint}"
    field = loc[0] if loc else "?"
    if err["type"] == "missing":
        return f"{source}: {field}: is required; {FIXES.get(field, 'add it')}"
    where = ".".join(loc)
    value = data.get(field) if len(loc) == 1 else err.get("input")
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] in (
        "string_type",
        "int_type",
        "dict_type",
        "list_type",
        "literal_error",
        "bool_type",
        "int_parsing",
        "greater_than_equal",
    ):
        msg = {
            "string_type": "must be a string",
            "int_type": "must be an integer",
            "dict_type": "must be an object",
            "list_type": "must be a list",
            "int_parsing": "must be an integer",
            "bool_type": "must be a boolean",
        }.get(err["type"], msg)
    return f"{source}: {where}: {msg} (got {_describe(value)}); {FIXES.get(field, '')}".rstrip("; ")
