"""Devices: the host-device preparation done before JAX starts (``host``) and the sharding and
``jax.distributed`` of a run (``distributed``)."""
