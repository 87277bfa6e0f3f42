"""Policy workers' distributed plumbing (``nemo_rl.models.policy``): see ``workers``."""
