"""Planning a run before anything is compiled or written: the plan of a new or resumed run
(``run_plan``, ``resume``), which checkpoints a resume continues from (``triage``), the run directory
checked and claimed (``preparation``), and the plan told to the user (``messages``)."""
