"""What another user can reach of a running job, tried as an attacker would (run as that user,
on a node of the job or on the login node). Reads on stdin, as JSON (never in argv, which every
user may read): the job dir, the job's node-local dir, the head's IP, its ports, and the job's
token, which the probe uses only for the control calls (the same request with the token must
work, so a refusal is the token's doing, not a wrong address) and to look for it in /proc.
Prints one JSON object: each attempt -> "refused: ..." or "OPEN: ..."."""

import json
import os
import socket
import sys
import urllib.error
import urllib.request

import grpc
from ray.core.generated import (
    gcs_service_pb2,
    gcs_service_pb2_grpc,
    node_manager_pb2,
    node_manager_pb2_grpc,
    ray_client_pb2,
    ray_client_pb2_grpc,
)


def read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.read(1)
        return f"OPEN: read {path}"
    except OSError as exc:
        return f"refused: {type(exc).__name__}"


def proc_scan(token: bytes) -> dict:
    """The token in any /proc/PID/cmdline (readable by all) or in an environ this user may read."""
    found, environ_read = [], 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        for name in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            environ_read += name == "environ"
            if token in data:
                found.append(f"{pid}/{name}")
    return {
        "proc": f"OPEN: the token in /proc/{', '.join(found)}" if found else "refused: in no readable /proc file",
        "environs_readable": environ_read,
    }


def rpc(call, request, token: str | None) -> str:  # type: ignore[no-untyped-def]
    meta = [("authorization", f"Bearer {token}")] if token else []
    try:
        call(request, timeout=10, metadata=meta)
        return "OPEN: answered"
    except grpc.RpcError as exc:
        return f"refused: {exc.code().name}"


def http(url: str, token: str | None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return f"OPEN: HTTP {r.status}"
    except urllib.error.HTTPError as exc:
        return f"refused: HTTP {exc.code}"
    except OSError as exc:
        return f"refused: {exc}"


def unix(path: str, kind: int) -> str:
    s = socket.socket(socket.AF_UNIX, kind)
    try:
        s.settimeout(5)
        s.connect(path)
        return f"OPEN: connected to {path}"
    except OSError as exc:
        return f"refused: {type(exc).__name__}"
    finally:
        s.close()


def main() -> None:
    job = json.loads(sys.stdin.read())
    token, ip, ports, job_dir, temp = job["token"], job["head_ip"], job["ports"], job["job_dir"], job["temp_dir"]
    out: dict = {"token file": read(f"{job_dir}/ray_auth_token")}
    for name in ("manifest.json", "events.jsonl", "cluster.json", "logs/driver.log", "logs/batch.log"):
        out[name] = read(f"{job_dir}/{name}")
    try:
        os.listdir(job_dir)
        out["job dir listing"] = "OPEN: listed"
    except OSError as exc:
        out["job dir listing"] = f"refused: {type(exc).__name__}"
    out.update(proc_scan(token.encode()))
    gcs = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(grpc.insecure_channel(f"{ip}:{ports['gcs']}"))
    out["gcs"] = rpc(gcs.GetAllNodeInfo, gcs_service_pb2.GetAllNodeInfoRequest(), None)
    meta = [("authorization", f"Bearer {token}")]
    nodes = gcs.GetAllNodeInfo(gcs_service_pb2.GetAllNodeInfoRequest(), timeout=10, metadata=meta).node_info_list
    out["gcs with the token (control)"] = "OPEN: answered" if nodes else "refused: no nodes"
    raylet = next(n for n in nodes if n.node_manager_address == ip)
    nm = node_manager_pb2_grpc.NodeManagerServiceStub(grpc.insecure_channel(f"{ip}:{raylet.node_manager_port}"))
    out["raylet"] = rpc(nm.GetNodeStats, node_manager_pb2.GetNodeStatsRequest(), None)
    out["raylet with the token (control)"] = rpc(nm.GetNodeStats, node_manager_pb2.GetNodeStatsRequest(), token)
    if ports.get("dashboard"):
        for path in ("api/jobs/", "nodes?view=summary", "api/v0/tasks"):
            out[f"dashboard {path}"] = http(f"http://{ip}:{ports['dashboard']}/{path}", None)
        out["dashboard with the token (control)"] = http(f"http://{ip}:{ports['dashboard']}/api/jobs/", token)
        post = urllib.request.Request(
            f"http://{ip}:{ports['dashboard']}/api/jobs/",
            data=b'{"entrypoint": "id"}',
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(post, timeout=10) as r:
                out["dashboard job submission"] = f"OPEN: HTTP {r.status}"
        except urllib.error.HTTPError as exc:
            out["dashboard job submission"] = f"refused: HTTP {exc.code}"
        except OSError as exc:
            out["dashboard job submission"] = f"refused: {exc}"
    if ports.get("ray_client_server"):
        client = ray_client_pb2_grpc.RayletDriverStub(grpc.insecure_channel(f"{ip}:{ports['ray_client_server']}"))
        ping = ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING)
        out["ray client"] = rpc(client.ClusterInfo, ping, None)
        out["ray client with the token (control)"] = rpc(client.ClusterInfo, ping, token)
    sockets = f"{temp}/r/session_latest/sockets"  # slurm_rl.core.paths.ray_temp_dir
    out["object store socket"] = unix(f"{sockets}/plasma_store", socket.SOCK_STREAM)
    out["raylet socket"] = unix(f"{sockets}/raylet", socket.SOCK_STREAM)
    out["fork server socket"] = unix(f"{sockets}/srl_fork", socket.SOCK_SEQPACKET)
    out["node-local dir listing"] = _listing(temp)
    print(json.dumps(out))


def _listing(path: str) -> str:
    try:
        os.listdir(path)
        return f"OPEN: listed {path}"
    except OSError as exc:
        return f"refused: {type(exc).__name__}"


if __name__ == "__main__":
    main()
