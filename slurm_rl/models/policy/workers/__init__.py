"""Policy worker bases (``nemo_rl.models.policy.workers``)."""
