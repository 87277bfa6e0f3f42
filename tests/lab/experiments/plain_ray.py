"""A driver as NeMo Gym writes one: plain ray.init() (no slurm-rl import), then Ray's state API."""

import json

import ray

ray.init()
alive = len([n for n in ray.nodes() if n["Alive"]])
try:
    from ray.util.state import list_nodes

    state_nodes = len(list_nodes())
except Exception as exc:  # noqa: BLE001 - reported
    state_nodes = f"state API failed: {exc!r}"
print("REPORT " + json.dumps({"nodes_at_connect": alive, "state_api_nodes": state_nodes}), flush=True)
