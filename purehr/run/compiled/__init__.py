"""The compiled program of a run: every task and seed in one jit (``train_all``), each task's
setup (``task_setup``), compiling and running it (``program``), the persistent compilation cache
(``compile_cache``) and the other processes of a multi-process run (``followers``)."""
