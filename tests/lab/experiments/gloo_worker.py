"""A worker that joins a torch.distributed (gloo) group from the env vars RayWorkerGroup sets."""

from __future__ import annotations

import os
import socket

import psutil
import ray


def tcp_local_addresses() -> list[str]:
    """The local IPv4 addresses of this process's established TCP connections, loopback left out."""
    conns = psutil.Process().net_connections(kind="tcp4")
    return sorted({c.laddr.ip for c in conns if c.status == "ESTABLISHED" and not c.laddr.ip.startswith("127.")})


def join_gloo_group(timeout_s: float | None = None) -> int:
    """Join the worker group's gloo group from the variables RayWorkerGroup sets; this rank
    (``timeout_s``: gloo's own for every collective, its default 30 min otherwise)."""
    import datetime

    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
        rank=rank,
        world_size=world,
        **({"timeout": datetime.timedelta(seconds=timeout_s)} if timeout_s else {}),
    )
    return rank


class GlooWorker:
    def allreduce(self, value: float) -> dict:
        import torch
        import torch.distributed as dist

        rank = join_gloo_group()
        t = torch.tensor([value])
        dist.all_reduce(t)
        links = tcp_local_addresses()  # gloo's connections are still open here
        # no rank may close its side before every rank has looked: a peer's close turns this
        # rank's connections to CLOSE_WAIT, and the list came back empty once in five CI runs
        dist.barrier()
        dist.destroy_process_group()
        return {
            "tcp_local_ips": links,
            "master_addr": os.environ["MASTER_ADDR"],
            "ray_ip": ray.util.get_node_ip_address(),
            "gloo_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
            "nccl_ifname": os.environ.get("NCCL_SOCKET_IFNAME"),
            "sum": t.item(),
            "rank": rank,
            "node_rank": int(os.environ["NODE_RANK"]),
            "ip": socket.gethostbyname(socket.gethostname()),
            "host": socket.gethostname(),
        }
