"""Using a trained policy outside the training loop: the deterministic policy as a program of
named arrays (``program``), written as ONNX and a ``jax.export`` program (``formats``), checked
against the policy JAX ran on held-out observations (``parity``), described by a contract
(``contract``), and run by ONNX Runtime in a process that does not import JAX (``runner``,
``onnx_worker``). ``purehr.export`` (``purehr.deploy.export``) does all of it; docs/how-to/export.md."""
