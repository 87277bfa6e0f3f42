"""Which of its addresses a node gives Ray (and NCCL/gloo), on nodes with several networks.

GPU nodes have a management Ethernet, an InfiniBand/RoCE fabric and sometimes a storage network;
the name SLURM knows a node by usually resolves to the management one. The spec field
``network_interface`` (an interface name like ``ib0``, or a network like ``10.78.0.0/16``)
chooses the address every node uses: the head's GCS address, every node's Ray address, and so
the workers' ``MASTER_ADDR``; ``NCCL_SOCKET_IFNAME``/``GLOO_SOCKET_IFNAME`` name the interface
unless the user set them. Without the field a node uses what its name resolves to, provided that
is one of its own addresses (a name resolving to another host, or to Debian's 127.0.1.1 on a
multi-node job, would make Ray unreachable in ways that surface minutes later).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from ..core.errors import SlurmRlError

SOCKET_IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


class AddressProblem(SlurmRlError):
    """This node has no usable address for the job; the message names the field and the fix."""


@dataclass(frozen=True)
class NodeAddress:
    ip: str
    interface: str | None  # None: from the node's name, interface not chosen by the spec


def ipv4_addresses() -> dict[str, list[str]]:
    """{interface: [IPv4 addresses]} of this node."""
    import psutil

    return {
        name: [a.address for a in addrs if a.family == socket.AF_INET] for name, addrs in psutil.net_if_addrs().items()
    }


def describe(interfaces: dict[str, list[str]]) -> str:
    return ", ".join(f"{name} {'/'.join(ips) or '(no IPv4)'}" for name, ips in sorted(interfaces.items()))


def is_network(value: str) -> bool:
    return "/" in value


def choose_address(
    node: str, network_interface: str, interfaces: dict[str, list[str]], resolve=socket.gethostbyname, nodes: int = 2
) -> NodeAddress:
    """The address this node (named ``node``) gives Ray; AddressProblem if it has none."""
    if network_interface and is_network(network_interface):
        net = ipaddress.ip_network(network_interface, strict=False)
        for name, ips in sorted(interfaces.items()):
            for ip in ips:
                if ipaddress.ip_address(ip) in net:
                    return NodeAddress(ip, name)
        raise AddressProblem(
            f"no address in {network_interface} on this node (spec field network_interface; its interfaces: "
            f"{describe(interfaces)}); name the network these nodes share, or an interface like ib0"
        )
    if network_interface:
        found = interfaces.get(network_interface)
        if not found:
            why = "no IPv4 address on" if network_interface in interfaces else "no interface"
            raise AddressProblem(
                f"{why} {network_interface} on this node (spec field network_interface; its interfaces: "
                f"{describe(interfaces)}); use an interface every node of the partition has, or a network "
                f"like 10.78.0.0/16"
            )
        return NodeAddress(found[0], network_interface)
    try:
        ip = resolve(node)
    except OSError as exc:
        raise AddressProblem(f"cannot resolve node name {node!r} ({exc}); add it to DNS or /etc/hosts") from None
    own = {a for ips in interfaces.values() for a in ips}
    if ip in own or (nodes == 1 and ipaddress.ip_address(ip).is_loopback):
        return NodeAddress(ip, None)
    raise AddressProblem(
        f"its name {node} resolves to {ip}, which is not an address of this node (its interfaces: "
        f"{describe(interfaces)}); "
        f"the other nodes could not reach its Ray. Fix the name in DNS or /etc/hosts, or set the spec field "
        f"network_interface to the interface (e.g. ib0) or network (e.g. 10.78.0.0/16) the nodes share"
    )


def socket_ifname_env(address: NodeAddress, environ: dict[str, str]) -> dict[str, str]:
    """NCCL's and gloo's interface variables for a chosen interface, where the user set none."""
    if address.interface is None:
        return {}
    return {var: address.interface for var in SOCKET_IFNAME_VARS if not environ.get(var)}
