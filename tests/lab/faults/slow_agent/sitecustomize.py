"""A lab fault, put on a job's PYTHONPATH by its spec's env: on every node but the head (or, with
SLOW_AGENT_RANKS=0,2, on the nodes of those SLURM_NODEIDs), the job's first Ray dashboard agent
starts 20 s late, as on an overloaded node. Ray's raylet waits a fixed 15 s for its agents' port
files and then aborts, so that node's first `ray start` fails. (A job without the dashboard starts
the agent through slurm-rl's worker_env/minimal_agent.py, which then runs Ray's agent.py.)"""

import os
import sys

_rank = os.environ.get("SLURM_NODEID", "0")
_ranks = os.environ.get("SLOW_AGENT_RANKS")
if (
    sys.argv
    and sys.argv[0].endswith(("dashboard/agent.py", "worker_env/minimal_agent.py"))
    and (_rank in _ranks.split(",") if _ranks else _rank != "0")
):
    marker = f"/tmp/slow-agent-{os.environ.get('SLURM_JOB_ID')}"  # node-local: once per node and job
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        pass
    else:
        import time

        time.sleep(20)
