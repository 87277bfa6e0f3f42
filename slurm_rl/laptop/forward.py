"""A command typed on the laptop, run on the login node: its parsed parameters back into an
argv (what the laptop names as files replaced by their uploaded copies), then the same
slurm-rl there, its output and exit code passed through. `fetch` extracts the results here;
`dashboard` forwards the dashboard to 127.0.0.1."""

from __future__ import annotations

import io
import os
import sys
import tarfile
from pathlib import Path
from typing import Any

import click

from ..config.spec import SPEC_ENV_VAR, ClusterSpec, load_spec
from ..login.submission.snapshot import directory_files, repository_root, tracked_files
from .session import Remote, connect, laptop_spec_text
from .ssh import Login, LoginError

JOB_COMMANDS = ("submit", "render", "sweep")  # [SPEC.json] EXPERIMENT [ARGS]: code goes with them


def to_argv(command: click.Command, params: dict[str, Any]) -> list[str]:
    """``params`` (as click parsed them) as an argv that parses to the same on the other side."""
    opts: list[str] = []
    positional: list[str] = []
    for p in command.params:
        v = params.get(p.name or "")
        if v is None or v == () or v is False:
            continue
        if isinstance(p, click.Argument):
            positional += [str(x) for x in v] if p.nargs == -1 else [str(v)]
        elif isinstance(p, click.Option):
            flag = max(p.opts, key=len)
            if p.is_flag:
                opts.append(flag)
            elif p.multiple:
                opts += [a for item in v for a in (flag, str(item))]
            elif v != p.default:
                opts += [flag, str(v)]
    return [*opts, "--", *positional] if positional else opts


def spec_path_of(name: str, params: dict[str, Any]) -> str | None:
    """The laptop spec a command names: a job command's SPEC.json, --spec, doctor's SPEC, or $CLUSTER_SPEC_PATH."""
    args = params.get("args") or ()
    if name in JOB_COMMANDS and args and str(args[0]).endswith(".json"):
        return str(args[0])
    return params.get("spec_flag") or params.get("spec_path") or os.environ.get(SPEC_ENV_VAR) or None


def open_remote(name: str, params: dict[str, Any], target: str) -> tuple[Remote, ClusterSpec | None]:
    """The probed login node, and the laptop's spec (read once; None: no spec named)."""
    path = spec_path_of(name, params)
    spec = load_spec(path) if path else None  # a bad spec: one line and exit 2 here, nothing sent
    raw, text = laptop_spec_text(path)
    python = str(raw.get("login_python") or raw.get("python") or "python3")
    fileroot = str(raw.get("fileroot") or ("" if spec else "~/.cache/slurm_rl"))  # none: the login node's default
    return connect(Login(target), python, fileroot, text), spec


def _job_uploads(params: dict[str, Any], remote: Remote, spec: ClusterSpec | None) -> tuple[dict[str, Any], str]:
    """The experiment (or, with --snapshot, its repository's tracked files; with --parts, its
    whole directory: the services' code), a --grid and a --parts file copied to the login node;
    the parameters pointing at the copies, and the upload dir."""
    args = list(params.get("args") or ())
    if args and args[0].endswith(".json"):
        args.pop(0)
    files: dict[str, Path] = {}
    snapshot = bool(params.get("snapshot")) or (spec is not None and spec.snapshot)
    experiment = Path(args[0]) if args else None
    if experiment is not None and not experiment.is_file():
        raise LoginError(f"experiment {experiment} does not exist here; give the path of a Python file")
    if experiment is not None and snapshot:
        root = repository_root(experiment.resolve())
        for rel in tracked_files(root):
            if (root / rel).is_file():
                files[f"repo/{rel}"] = root / rel
        args[0] = f"repo/{experiment.resolve().relative_to(root)}"
    elif experiment is not None:
        if params.get("parts_file"):  # a job of services runs them in its copy of the experiment's dir
            for rel in directory_files(experiment.parent, "--parts"):
                files[f"code/{rel}"] = experiment.parent / rel
        files[f"code/{experiment.name}"] = experiment
        args[0] = f"code/{experiment.name}"
    if params.get("grid"):
        files["grid.jsonl"] = Path(params["grid"])
    parts = f"parts{Path(params['parts_file']).suffix}" if params.get("parts_file") else ""
    if parts:
        files[parts] = Path(params["parts_file"])
    up = remote.upload(files, snapshot and experiment is not None) if files else ""
    if experiment is not None:
        args[0] = f"{up}/{args[0]}"
    if params.get("grid"):
        params = {**params, "grid": f"{up}/grid.jsonl"}
    if parts:
        params = {**params, "parts_file": f"{up}/{parts}"}
    return {**params, "args": tuple(filter(None, [remote.spec, *args])), "spec_flag": None}, up


def _prepared(name: str, params: dict[str, Any], target: str) -> tuple[Remote, dict[str, Any], str]:
    """The probed login node, the parameters as it must see them (uploaded code, its spec), and
    the upload dir ("" where nothing went)."""
    remote, spec = open_remote(name, params, target)
    up = ""
    if name in JOB_COMMANDS:
        params, up = _job_uploads(params, remote, spec)
    elif "spec_flag" in params:
        params = {**params, "spec_flag": remote.spec or None}
    elif "spec_path" in params:
        params = {**params, "spec_path": remote.spec or None}
    return remote, params, up


def _remote_argv(remote: Remote, name: str, command: click.Command, params: dict[str, Any], up: str) -> list[str]:
    argv = remote.slurm_rl([*name.split(), *to_argv(command, params)])  # "images list": a group's
    if up:  # the uploaded code goes once the command ends (a job runs from its job dir's copy)
        argv = ["sh", "-c", 'trap \'rm -rf "$0"\' EXIT HUP INT TERM; "$@"', up, *argv]
    return argv


def forward(name: str, command: click.Command, params: dict[str, Any], target: str) -> int:
    """Run ``slurm-rl NAME PARAMS`` on the login node ``target``; its exit code."""
    remote, params, up = _prepared(name, params, target)
    if name == "fetch":
        return _fetch(remote, params)
    if name == "dashboard":
        from . import tunnel

        argv = [name, *to_argv(command, {**params, "as_json": True, "stdin_bound": True})]
        run = tunnel.forward_tensorboard if params.get("tensorboard") else tunnel.forward_dashboard
        return run(remote, argv, str(params["job"]))
    argv = _remote_argv(remote, name, command, params, up)
    # a terminal there too where one is here and the command is interactive or follows a job:
    # Ctrl-C then reaches the command on the login node instead of cutting the connection
    live = (name == "attach" and not params.get("command")) or params.get("follow") or params.get("wait")
    return remote.login.stream(argv, tty=bool(live) and sys.stdin.isatty() and sys.stdout.isatty())


def capture(name: str, command: click.Command, params: dict[str, Any], target: str) -> tuple[int, str, str]:
    """``slurm-rl NAME PARAMS`` on the login node ``target``, its exit code, stdout and stderr
    captured (a cluster asked through its login node: --cluster auto)."""
    remote, params, up = _prepared(name, params, target)
    res = remote.login.run(_remote_argv(remote, name, command, params, up))
    return res.returncode, res.stdout.decode(errors="replace"), res.stderr.decode(errors="replace")


def _fetch(remote: Remote, params: dict[str, Any]) -> int:
    """The results as one tar from the login node, extracted under --to (default ./JOB)."""
    destination = Path(params.get("to") or str(params["job"]))
    argv = ["fetch", "--to", "-", *(["--spec", remote.spec] if remote.spec else []), "--", str(params["job"])]
    res = remote.login.run(remote.slurm_rl(argv), timeout=3600)
    if res.returncode != 0:
        sys.stderr.write(res.stderr.decode(errors="replace"))
        return res.returncode
    destination.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(res.stdout), mode="r:gz") as tar:
        members = tar.getmembers()
        tar.extractall(destination, filter="data")
    click.echo(f"job {params['job']}: {len(members)} file(s) into {destination}/")
    return 0
