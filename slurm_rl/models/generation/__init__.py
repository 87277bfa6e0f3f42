"""Generation engines' placement (``nemo_rl.models.generation``)."""
