"""One error hierarchy for slurm-rl.

Every message names the field or job id, what was wrong and how to fix it. The CLI turns a
``UsageError`` into one line on stderr and exit code 2; any other ``SlurmRlError`` exits 1.
"""

from __future__ import annotations

from collections.abc import Sequence


class SlurmRlError(Exception):
    """Base class of every error slurm-rl raises on purpose."""

    exit_code = 1


class UsageError(SlurmRlError):
    """Bad input from the user: nothing was submitted, nothing was changed."""

    exit_code = 2


class SpecError(UsageError):
    """A cluster spec is malformed; the message names the field, the value and the fix."""


class SlurmCommandError(SlurmRlError):
    """A SLURM command failed; carries argv, exit code, stdout and stderr."""

    def __init__(self, argv: Sequence[str], returncode: int | None, stdout: str, stderr: str, hint: str = "") -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        what = "timed out" if returncode is None else f"exited {returncode}"
        detail = (stderr or stdout).strip().splitlines()
        msg = f"`{' '.join(self.argv)}` {what}"
        if detail:
            msg += f": {detail[-1]}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)


class JobError(SlurmRlError):
    """A job failed or cannot be found; the message names the job id and the log to read."""


class UnknownJobError(UsageError):
    """A job id that has no job dir of this user (a typo, another user's job, another spec)."""
