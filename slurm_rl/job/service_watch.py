"""Node 0's view of a job of parts' services (their instances' state files, job/service_instances.py):
the driver starts once every required service is ready (Ray comes up meanwhile), and the job
ends, naming the service, the node, the exit and its last lines, when a required instance is
past its restarts. A service that is not required leaves the job running (degraded)."""

from __future__ import annotations

import time
from pathlib import Path

from ..core.service_states import expected_instances, read_states
from .context import NodeContext, NodeFailure, Stopped

CHECK_EVERY_S = 1.0
WAIT_POLL_S = 0.25
TAIL_LINES = 3


def last_lines(path: str, n: int = TAIL_LINES) -> str:
    try:
        lines = [ln.strip() for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def failure_line(state: dict, restarts: int) -> str:
    tail = last_lines(state.get("log", ""))
    return (
        f"service {state['service']} failed on {state['node']}: instance {state['instance']} exited "
        f"{state.get('exit_code')} after {restarts} restart(s)"
        + (f"; its last lines: {tail}" if tail else "")
        + f"; see {state.get('log')}"
    )


class ServiceWatch:
    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.parts = ctx.manifest.parts
        self.expected = expected_instances(self.parts)
        self._next = 0.0

    def states(self) -> dict[str, list[dict]]:
        return read_states(self.ctx.paths.services, self.ctx.attempt)

    def failed_required(self, states: dict[str, list[dict]]) -> str | None:
        for name, instances in states.items():
            part = self.parts.get(name)
            for state in instances:
                if part is not None and part.required and state.get("state") == "failed":
                    return failure_line(state, part.restarts)
        return None

    def not_ready(self, states: dict[str, list[dict]]) -> list[str]:
        """Required services with fewer ready instances than they run ("judge (1 of 2 ready)")."""
        out = []
        for name, total in self.expected.items():
            if not self.parts[name].required:
                continue
            ready = sum(1 for s in states.get(name, []) if s.get("ready"))
            if ready < total:
                out.append(f"{name} ({ready} of {total} ready)")
        return out

    def poll(self) -> str | None:
        """A reason to end the job (a required service past its restarts), at most once a second."""
        now = time.monotonic()
        if now < self._next or not self.expected:
            return None
        self._next = now + CHECK_EVERY_S
        return self.failed_required(self.states())

    def wait_ready(self) -> None:
        """Until every required service is ready: NodeFailure when one fails or the deadline passes."""
        if not self.expected:
            return
        required = [n for n in self.expected if self.parts[n].required]
        deadline_s = max((self.parts[n].ready_timeout_s for n in required), default=0.0) + 60.0
        end = time.monotonic() + deadline_s
        self.ctx.say(f"waiting for the required services: {', '.join(required) or 'none'}")
        while not self.ctx.stop_requested.is_set():
            states = self.states()
            failed = self.failed_required(states)
            if failed:
                raise NodeFailure(failed)
            left = self.not_ready(states)
            if not left:
                self.ctx.event("services_ready", services=sorted(self.expected))
                return
            if time.monotonic() > end:
                raise NodeFailure(f"services not ready within {deadline_s:g} s: {', '.join(left)}")
            time.sleep(WAIT_POLL_S)
        raise Stopped(f"stopped while waiting for the services: {self.ctx.stop_reason}")
