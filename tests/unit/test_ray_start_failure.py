"""When `ray start` fails because its raylet aborted, the node's failure names the raylet's own
reason (Ray's CLI says only "The current node timed out during startup")."""

from __future__ import annotations

from pathlib import Path

from slurm_rl.job.ray_start import raylet_fatal

# raylet.out of a lab head whose dashboard agent started too slowly (ci16, 2026-11-26), shortened
RAYLET_OUT = """\
[2026-11-26 19:02:18,053 I 699 699] (raylet) main.cc:283: Setting cluster ID to: ec4910ee
[2026-11-26 19:02:19,187 I 699 725] (raylet) agent_manager.cc:81: Monitor agent process with name dashboard_agent
[2026-11-26 19:02:35,575 C 699 699] (raylet) node_manager.cc:3576:  An unexpected system state has occurred. \
You have likely discovered a bug in Ray. Please report this issue at https://github.com/ray-project/ray/issues \
and we'll work with you to fix it. Check failed: statussetor3576.has_value() Timed out waiting for file \
/tmp/srl-1/session_2026-11-26_19-02-16_965994_373/metrics_agent_port_d21a284e
*** StackTrace Information ***
/opt/slurm-rl/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet(+0x2eee5a) [0x563865c53e5a]
"""


def _session(tmp_path: Path, text: str) -> Path:
    logs = tmp_path / "session_2026" / "logs"
    logs.mkdir(parents=True)
    (logs / "raylet.out").write_text(text)
    return logs


def test_the_raylets_abort_reason_is_found(tmp_path: Path) -> None:
    why = raylet_fatal(_session(tmp_path, RAYLET_OUT))
    session = "/tmp/srl-1/session_2026-11-26_19-02-16_965994_373"
    assert why == f"Timed out waiting for file {session}/metrics_agent_port_d21a284e"


def test_a_fatal_line_without_a_check_is_given_whole(tmp_path: Path) -> None:
    line = "[2026-11-26 19:02:35,575 C 1 1] (raylet) main.cc:12: Failed to bind port 40001\n"
    assert raylet_fatal(_session(tmp_path, "[2026-11-26 19:02:35,000 I 1 1] (raylet) main.cc:1: hi\n" + line)) == (
        "Failed to bind port 40001"
    )


def test_nothing_to_say_when_the_raylet_did_not_abort_or_left_no_log(tmp_path: Path) -> None:
    assert raylet_fatal(tmp_path / "no-session" / "logs") is None
    assert raylet_fatal(_session(tmp_path, RAYLET_OUT.split("[2026-11-26 19:02:35")[0])) is None
