"""A code sandbox sidecar for the parts lab test: a TCP server on --port that runs each line it
gets as Python and answers with what the code printed (as a sandbox does with model-written
code), plus the node it runs on."""

import argparse
import contextlib
import io
import socket
import socketserver

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
args = ap.parse_args()


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        code = self.rfile.readline().decode()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                exec(code, {})
            except Exception as exc:  # noqa: BLE001 - what the code did is the answer
                print(f"error: {exc!r}")
        self.wfile.write(f"{socket.gethostname()}|{out.getvalue().strip()}\n".encode())


socketserver.ThreadingTCPServer.allow_reuse_address = True
print(f"sandbox on port {args.port}", flush=True)
socketserver.ThreadingTCPServer(("0.0.0.0", args.port), Handler).serve_forever()
