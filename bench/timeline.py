"""Print a job's phase timeline from its events.jsonl alone: `python bench/timeline.py JOB_DIR`."""

import json
import sys
from pathlib import Path


def timeline(job_dir: str) -> list[tuple[float, str, str]]:
    events = [json.loads(line) for line in Path(job_dir, "events.jsonl").read_text().splitlines() if line.strip()]
    t0 = events[0]["t"]
    return [(round(e["t"] - t0, 2), e["event"], e.get("node", "")) for e in events]


if __name__ == "__main__":
    for t, ev, node in timeline(sys.argv[1]):
        print(f"{t:7.2f}  {ev:14s} {node}")
