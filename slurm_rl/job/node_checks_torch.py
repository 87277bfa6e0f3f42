"""The part of a node's preflight that needs the job's Python with torch (job/node_checks.py runs it
with the job's interpreter): it imports slurm_rl and torch (ray's import is proven by the node's
own `ray start`); runs a small kernel on each GPU
torch sees where it sees any; then, across every node of the job, a timed exchange (each node
sends PAYLOAD bytes to the next and waits for its acknowledgement, so the time is the sender's)
and an all-reduce, over NCCL where every node's torch sees a GPU, else gloo. Prints one JSON object.

argv: RANK WORLD STORE_FILE GPUS TIMEOUT_S IP. Rank 0 serves the rendezvous (a TCPStore on a free port
of its address IP) and writes ``HOST:PORT`` to STORE_FILE (the job dir); the others read it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

PAYLOAD_BYTES = 512 * 1024


def check(name: str, ok: bool, found: str, seconds: float | None = None) -> dict[str, Any]:
    return {"name": name, "ok": ok, "found": found, "seconds": seconds}


def main(rank: int, world: int, store_file: Path, gpus: int, timeout_s: float, ip: str) -> list[dict[str, Any]]:
    try:  # (ray: this node's `ray start`, in the same Python, imports it; 0.8 CPU-s saved here)
        import torch

        import slurm_rl  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - the check's finding
        return [check("python", False, f"{sys.executable} cannot import slurm_rl and torch: {exc!r}")]
    out = [check("python", True, f"{sys.executable}: torch {torch.__version__}")]
    if gpus and torch.cuda.is_available():  # real GPUs: each runs a kernel (the lab's fake ones cannot)
        seen = torch.cuda.device_count()
        try:
            for i in range(seen):
                assert torch.ones(8, device=f"cuda:{i}").add(1).sum().item() == 16.0
            out.append(check("gpus", seen == gpus, f"torch sees {seen} GPU(s), each ran a kernel; SLURM gave {gpus}"))
        except Exception as exc:  # noqa: BLE001
            out.append(check("gpus", False, f"a kernel failed on a GPU torch sees: {exc!r}"))
    out.append(collective(rank, world, store_file, timeout_s, ip, gpus))
    return out


def color(rank: int, world: int) -> int:
    """The phase in which ``rank`` sends: no node receives while it sends, so an acknowledgement
    never waits behind its own node's data (a shaped link would then slow its neighbour's time)."""
    return 2 if world % 2 and rank == world - 1 and world > 1 else rank % 2


def choose_backend(store: Any, rank: int, world: int, cuda: bool) -> str:
    """NCCL where every node's torch sees a GPU (the real fabric a run's collectives take), else
    gloo: every node says what it has through the rendezvous store, so all pick the same."""
    store.set(f"preflight-cuda-{rank}", "1" if cuda else "0")
    return "nccl" if all(store.get(f"preflight-cuda-{r}") == b"1" for r in range(world)) else "gloo"


def exchange(dist: Any, torch: Any, rank: int, world: int, device: str = "cpu") -> float:
    """Each node sends PAYLOAD_BYTES to the next, phase by phase; seconds until the next node
    acknowledged all of it (the sender's link and the receiver's; on a GPU, once the device is done)."""
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    settle = torch.cuda.synchronize if device != "cpu" else (lambda: None)  # NCCL's wait is the stream's
    send_s = 0.0
    for phase in range(3 if world % 2 and world > 1 else 2):
        dist.barrier()
        settle()
        if color(rank, world) == phase:
            t0 = time.perf_counter()
            sent, acked = (
                dist.isend(torch.zeros(PAYLOAD_BYTES // 4, device=device), nxt, tag=1),
                dist.irecv(torch.zeros(1, device=device), nxt, tag=2),
            )
            acked.wait()
            settle()
            send_s = time.perf_counter() - t0
            sent.wait()
        if color(prv, world) == phase:
            dist.irecv(torch.empty(PAYLOAD_BYTES // 4, device=device), prv, tag=1).wait()
            dist.isend(torch.ones(1, device=device), prv, tag=2).wait()
            settle()
    return send_s


def collective(rank: int, world: int, store_file: Path, timeout_s: float, ip: str, gpus: int = 0) -> dict[str, Any]:
    import datetime

    import torch
    import torch.distributed as dist

    from ..core.events import write_atomic

    if world < 2:
        return check("collective", True, "one node: nothing to exchange")
    deadline = time.monotonic() + timeout_s
    backend = "gloo"
    try:
        if rank == 0:
            store = dist.TCPStore(ip, 0, world, True, datetime.timedelta(seconds=timeout_s), wait_for_workers=False)
            write_atomic(store_file, f"{ip}:{store.port}\n")  # the others poll for it
        else:
            while not store_file.exists():
                if time.monotonic() > deadline:
                    return check("collective", False, f"no rendezvous address from node 0 within {timeout_s:g} s")
                time.sleep(0.1)
            ip, port = store_file.read_text().strip().rsplit(":", 1)
            left = max(1.0, deadline - time.monotonic())
            store = dist.TCPStore(ip, int(port), world, False, datetime.timedelta(seconds=left))
        backend = choose_backend(store, rank, world, gpus > 0 and torch.cuda.is_available())
        device = "cuda:0" if backend == "nccl" else "cpu"  # the first GPU SLURM gave this node
        if backend == "nccl":
            torch.cuda.set_device(0)
        timeout = datetime.timedelta(seconds=max(1.0, deadline - time.monotonic()))
        dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
        send_s = exchange(dist, torch, rank, world, device)
        t1 = time.perf_counter()
        summed = torch.ones(PAYLOAD_BYTES // 4, device=device)
        dist.all_reduce(summed)
        total = summed[0].item()  # (waits for the device)
        reduce_s = time.perf_counter() - t1
        dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - a timeout, a peer gone: the finding
        text = str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else repr(exc)
        return check("collective", False, f"the {backend} exchange across {world} nodes failed here: {text}")
    if total != world:
        return check("collective", False, f"the {backend} all-reduce over {world} nodes summed to {total:g} here")
    found = (
        f"sent {PAYLOAD_BYTES // 1024} KiB in {send_s:.3f} s; {backend} all-reduce {reduce_s:.3f} s over {world} nodes"
    )
    return check("collective", True, found, round(send_s, 4))


if __name__ == "__main__":
    r, w, f, g, t, a = sys.argv[1:7]
    print(json.dumps(main(int(r), int(w), Path(f), int(g), float(t), a)), flush=True)
