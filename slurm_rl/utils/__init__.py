"""Helpers NeMo RL code imports from ``nemo_rl.utils`` (``venvs``)."""
