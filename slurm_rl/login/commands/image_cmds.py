"""`slurm-rl images list|prune`: what the per-node image cache holds, and clearing it."""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ...config.spec import load_spec
from .job_command import CONTEXT, RemoteCommand, slurm_client, spec_option

if TYPE_CHECKING:
    from ..images import NodeReport


def _options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--json", "as_json", is_flag=True, help="One JSON object per node.")(f)
    f = click.option(
        "--partition", "-p", default=None, help="Whose nodes (default: the spec's partition, else SLURM's default)."
    )(f)
    return spec_option()(f)


@click.group(context_settings=CONTEXT)
def images() -> None:
    """The per-node image cache of pyxis jobs: each node unpacks a squashfs image once per image
    version and every job's container starts from that copy under a layer of its own (spec:
    "image_cache", "image_cache_gb", least recently used evicted beyond it). These commands run
    one short step on every node of a partition, through SLURM.

    \b
      slurm-rl images list  --spec cluster_specs/site.json
      slurm-rl images prune --spec cluster_specs/site.json -p gpu
    """


@images.command("list", cls=RemoteCommand, context_settings=CONTEXT)
@_options
def list_images(partition: str | None, as_json: bool, spec_flag: str | None) -> None:
    """The prepared images on each node: image, size, last use, whether a running job uses it."""
    from ..images import gigabytes

    part, reports, missing = _on_nodes("list", partition, spec_flag)
    if as_json:
        for r in reports:
            click.echo(json.dumps({"node": r.node, "images": r.images}))
    else:
        total = 0
        for r in reports:
            if not r.images:
                click.echo(f"{r.node}: no prepared images")
            for img in r.images:
                total += int(img.get("bytes") or 0)
                used = img.get("last_used")
                when = datetime.datetime.fromtimestamp(used).strftime("%Y-%m-%d %H:%M") if used else "?"
                size = gigabytes(int(img.get("bytes") or 0))
                busy = "  in use" if img.get("in_use") else ""
                click.echo(f"{r.node}: {img['key']}  {size}  used {when}  {img.get('image') or '?'}{busy}")
        click.echo(f"partition {part}: {len(reports)} node(s), {gigabytes(total)} prepared")
    _say_missing(missing)


@images.command("prune", cls=RemoteCommand, context_settings=CONTEXT)
@click.argument("keys", nargs=-1)
@_options
def prune_images(keys: tuple[str, ...], partition: str | None, as_json: bool, spec_flag: str | None) -> None:
    """Remove prepared images (all, or the KEYs `images list` shows) that no running job uses;
    the next job on that node prepares its image again."""
    from ..images import gigabytes

    part, reports, missing = _on_nodes("prune", partition, spec_flag, keys)
    if as_json:
        for r in reports:
            line = {"node": r.node, "removed": r.removed, "in_use": r.in_use, "freed_bytes": r.freed_bytes}
            click.echo(json.dumps(line))
    else:
        for r in reports:
            kept = f"; kept {len(r.in_use)} in use" if r.in_use else ""
            click.echo(f"{r.node}: removed {len(r.removed)}, freed {gigabytes(r.freed_bytes)}{kept}")
        freed = sum(r.freed_bytes for r in reports)
        click.echo(f"partition {part}: freed {gigabytes(freed)}")
    _say_missing(missing)


def _on_nodes(
    action: str, partition: str | None, spec_flag: str | None, keys: tuple[str, ...] = ()
) -> tuple[str, list[NodeReport], list[str]]:
    """``action`` on every node of the partition (default: the spec's): (partition, reports,
    nodes that did not answer)."""
    from ..images import partition_nodes, run_cache_command

    spec = load_spec(spec_flag)
    client = slurm_client(spec)
    part, nodes = partition_nodes(client, partition or spec.partition)
    reports, missing = run_cache_command(spec, client, nodes, action, keys)
    return part, reports, missing


def _say_missing(missing: list[str]) -> None:
    if missing:
        click.echo(f"slurm-rl: no answer from {', '.join(missing)} (down or busy)", err=True)
        sys.exit(1)
