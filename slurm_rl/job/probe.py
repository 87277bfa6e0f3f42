"""What `slurm-rl doctor --probe` asks of a compute node, run there by one short srun: can it
write the fileroot, which interfaces it has (against the spec's ``network_interface``), is there
room for Ray's ports outside the ephemeral range, and which Python, Ray and slurm-rl it runs.
Prints one ``SLURM_RL_PROBE {json}`` line; the login side (login/doctor_probe.py) judges it."""

from __future__ import annotations

import argparse
import json
import platform
import socket
from pathlib import Path

from .._version import __version__
from ..core.events import write_atomic
from ..core.ports import BLOCK_SIZE, ephemeral_range, free_ports, listen_range
from .network import AddressProblem, choose_address, describe, ipv4_addresses

PREFIX = "SLURM_RL_PROBE "


def probe(marker: str, network_interface: str) -> dict[str, object]:
    host = socket.gethostname()
    out: dict[str, object] = {"host": host, "python": platform.python_version(), "slurm_rl": __version__}
    try:
        import ray

        out["ray"] = ray.__version__
    except ImportError as exc:
        out["ray"] = None
        out["ray_error"] = str(exc)
    try:
        write_atomic(Path(marker), host, make_parents=False)  # a dir made on the login node, or not shared
        out["fileroot_error"] = ""
    except OSError as exc:
        out["fileroot_error"] = f"{exc.strerror}: {marker}"
    interfaces = ipv4_addresses()
    out["interfaces"] = describe(interfaces)
    try:
        address = choose_address(host, network_interface, interfaces)
        out["address"], out["network_error"] = f"{address.ip} ({address.interface or 'its name'})", ""
    except AddressProblem as exc:
        out["address"], out["network_error"] = "", str(exc)
    ephemeral = ephemeral_range()
    span = listen_range(ephemeral)
    ports = free_ports(BLOCK_SIZE)
    out["ephemeral"] = f"{ephemeral[0]}-{ephemeral[1]}"
    out["ports_ok"] = span is not None and len(ports) == BLOCK_SIZE and all(span[0] <= p < span[1] for p in ports)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--marker", required=True, help="a file to write under the fileroot")
    parser.add_argument("--network-interface", default="")
    args = parser.parse_args()
    print(PREFIX + json.dumps(probe(args.marker, args.network_interface)), flush=True)


if __name__ == "__main__":
    main()
