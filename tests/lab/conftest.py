"""Fixtures of the lab tests that need more than the plain lab."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import LAB
from tests.lab.helpers import pyxis_missing


@pytest.fixture(scope="session")
def pyxis_lab(lab: list[str]) -> list[str]:
    """The lab with Pyxis + enroot and a current image (it carries slurm-rl itself: rebuilt, in
    seconds, when the code changed since `up`); skips, saying why, on a lab without Pyxis."""
    why = pyxis_missing()
    if why:
        pytest.skip(why)
    res = subprocess.run([str(LAB), "image"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return lab
