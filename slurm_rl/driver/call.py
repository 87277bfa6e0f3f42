"""The driver of a job submitted as a function (``slurm_rl.submit(spec, fn, *args)``).

Submit copies this file into the job dir as the experiment; on node 0 it loads the pickled
call (submitit's ``DelayedSubmission``), runs it with the job's Ray cluster up (``RAY_ADDRESS``
set: the function calls ``init_ray()`` if it uses Ray) and pickles what it returned, or the
traceback of what it raised, for ``job.result()`` on the login node.
"""

from __future__ import annotations

import os
import sys
import traceback


def main() -> int:
    import cloudpickle
    from submitit.helpers import DelayedSubmission

    from slurm_rl.core.events import write_atomic  # absolute: this file runs as a script
    from slurm_rl.core.job_env import JobEnvironment
    from slurm_rl.core.paths import JobPaths

    paths = JobPaths(JobEnvironment.current().require_job_dir())
    sys.path.insert(0, os.getcwd())  # the submitter's directory: its modules unpickle as they import there
    call = DelayedSubmission.load(paths.call_pickle)
    try:
        outcome: tuple[str, object] = ("success", call.result())
        rc = 0
    except BaseException:  # noqa: BLE001 - reported to the caller, like submitit does
        outcome = ("error", traceback.format_exc())
        print(outcome[1], file=sys.stderr)
        rc = 1
    write_atomic(paths.call_result, cloudpickle.dumps(outcome))  # the caller polls for it: whole or absent
    return rc


if __name__ == "__main__":
    sys.exit(main())
