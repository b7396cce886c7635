"""What a run leaves on disk and the one place that reads it back: the layout and manifest
(``run_dir``), atomic files (``files``), CSV columns (``columns``), the lock (``lock``), the record of
what a task trained with (``record``), Orbax checkpoints (``checkpoints``), the machine (``machine``)
and the status the manifest says (``status``). No JAX at import, except ``checkpoints``."""
