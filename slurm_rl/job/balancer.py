"""One URL per service of a job of parts: a small HTTP balancer on the head, built on aiohttp (a
well-kept async HTTP server and client that ray[default] brings to every image slurm-rl runs
in; HAProxy would need to be in the job's image too). Requests go round-robin over the instances
the state files say are ready; an instance that refuses a connection is skipped at once and the
request goes to the next, so a caller sees at most the one request that was in flight when an
instance died (it gets 502). The URLs are in ``services/balancers.json``."""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from pathlib import Path

from ..core.events import write_json
from ..core.service_states import read_states

REFRESH_S = 0.5
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}


class Pool:
    """The ready instances of one service (refreshed from the state files), and those seen dead."""

    def __init__(self, services_dir: Path, name: str, attempt: int) -> None:
        self.services_dir, self.name, self.attempt = services_dir, name, attempt
        self.urls: list[str] = []
        self.down: dict[str, float] = {}  # url -> its state file's time when it refused
        self._stamp: dict[str, float] = {}
        self._next = 0.0
        self._turn = itertools.count()

    def refresh(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + REFRESH_S
        states = read_states(self.services_dir, self.attempt).get(self.name, [])
        self._stamp = {s["url"]: s.get("t", 0.0) for s in states}
        # a refusal holds until the instance's state changes (restarted, ready again)
        self.down = {u: t for u, t in self.down.items() if self._stamp.get(u) == t}
        self.urls = sorted(s["url"] for s in states if s.get("ready") and s["url"] not in self.down)

    def order(self) -> list[str]:
        """The ready instances, starting with the next in turn."""
        self.refresh()
        if not self.urls:
            return []
        k = next(self._turn) % len(self.urls)
        return self.urls[k:] + self.urls[:k]

    def mark_down(self, url: str) -> None:
        self.down[url] = self._stamp.get(url, 0.0)
        self.urls = [u for u in self.urls if u != url]


async def _serve(pools: dict[str, Pool], socks: dict[str, socket.socket], started: threading.Event) -> None:
    import aiohttp
    from aiohttp import web

    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=2.0))

    def handler(pool: Pool):
        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
            for url in pool.order():
                try:
                    async with session.request(
                        request.method, url + request.path_qs, headers=headers, data=body, allow_redirects=False
                    ) as res:
                        payload = await res.read()
                        out = {k: v for k, v in res.headers.items() if k.lower() not in HOP_HEADERS}
                        return web.Response(status=res.status, body=payload, headers=out)
                except aiohttp.ClientConnectorError:  # refused: nothing was sent, try the next
                    pool.mark_down(url)
                except aiohttp.ClientError as exc:  # died with the request in flight
                    pool.mark_down(url)
                    return web.Response(status=502, text=f"slurm-rl: {pool.name} instance {url} failed: {exc!r}\n")
            return web.Response(status=503, text=f"slurm-rl: no ready instance of {pool.name}\n")

        return handle

    runners = []
    for name, pool in pools.items():
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", handler(pool))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.SockSite(runner, socks[name]).start()
        runners.append(runner)
    started.set()
    await asyncio.Event().wait()  # until the process ends (the head's bootstrap: the job's end)


def start_balancers(services_dir: Path, names: list[str], attempt: int, host: str) -> dict[str, str]:
    """A balancer per service on ``host`` (a daemon thread of the head's bootstrap); their URLs,
    also written to ``services/balancers.json``. Each listens on a socket bound here to a port
    the kernel picks: a port found free and bound later can be taken in between, as the source
    port of any outgoing connection on the node (seen in CI: Errno 98 on a head whose Ray was
    starting)."""
    if not names:
        return {}
    socks = {name: _bound(host) for name in names}
    ports = {name: int(sock.getsockname()[1]) for name, sock in socks.items()}
    pools = {name: Pool(services_dir, name, attempt) for name in names}
    started = threading.Event()
    failed: list[BaseException] = []

    def serve() -> None:
        try:
            asyncio.run(_serve(pools, socks, started))
        except BaseException as exc:  # noqa: BLE001 - said by the caller
            failed.append(exc)
            started.set()

    threading.Thread(target=serve, name="balancers", daemon=True).start()
    started.wait(30)
    if failed or not started.is_set():
        raise RuntimeError(f"the services' balancer did not start on {host}: {failed[0] if failed else 'timed out'}")
    urls = {name: f"http://{host}:{port}" for name, port in ports.items()}
    write_json(services_dir / "balancers.json", {"attempt": attempt, "urls": urls})
    return urls


def _bound(host: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp's own sites do
    sock.bind((host, 0))
    return sock
