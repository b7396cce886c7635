"""The training algorithms, each one folder behind one interface (``base.Algorithm``), found by
name in ``registry`` (``--algorithm ppo``), and ``trainer.make_train``: every seed of any of them
in one jitted call."""
