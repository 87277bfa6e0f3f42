"""A judge service for the parts lab test: HTTP on --port, GET /health, and any other path
answers one JSON line naming this instance (node, instance, pid, its GPUs). With --die-after N
it exits 3 after N answers (a fault the test injects)."""

import argparse
import json
import os
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--fail", action="store_true", help="exit 3 at once (a service that keeps failing)")
args = ap.parse_args()
if args.fail:
    print("judge: failing on purpose", flush=True)
    raise SystemExit(3)
me = {
    "node": socket.gethostname(),
    "instance": os.environ.get("SLURM_RL_SERVICE_INSTANCE"),
    "pid": os.getpid(),
    "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"ok\n" if self.path == "/health" else (json.dumps(me) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


print(f"judge {me} on port {args.port}", flush=True)
ThreadingHTTPServer(("0.0.0.0", args.port), Handler).serve_forever()
