"""The exported files: ONNX (``jax2onnx``; run by ONNX Runtime) and a serialised ``jax.export``
program (StableHLO; no extra package). Both hold the whole batched policy program
(``purehr.deploy.program``) with a symbolic batch axis. The ONNX converter and runtime are the
``[export]`` extra: a format whose package is missing is refused, naming what to install."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Callable, Sequence

import jax
import numpy as np
from jax import export as jax_export
from jax.extend.core import Literal

from purehr.deploy.program import BATCH, PolicyProgram

ONNX_FILE = "policy.onnx"
JAX_FILE = "policy.jax_export"
FILES = {"onnx": ONNX_FILE, "jax": JAX_FILE}
"""format -> the file it is written to."""
PACKAGES = {"onnx": ("jax2onnx", "onnx", "onnxruntime"), "jax": ()}
"""format -> the packages it needs beyond purehr's own."""
EXTRA = "pip install 'purehr[export]'"
PLATFORMS = ("cpu", "cuda", "tpu")
"""The platforms a ``jax.export`` program is lowered for where the backend allows each (CPU always)."""
ONNX_OPSET = 21


class MissingExportPackage(ImportError):
    """A format whose packages are not installed."""


def check_formats(formats: Sequence[str]) -> tuple[str, ...]:
    """``formats`` checked: known names, their packages installed (else the extra to install is named)."""
    if isinstance(formats, str):
        formats = (formats,)
    formats = tuple(dict.fromkeys(formats))
    unknown = [name for name in formats if name not in FILES]
    if unknown or not formats:
        raise ValueError(f"format {unknown or formats!r}: expected one or more of {sorted(FILES)}")
    for name in formats:
        missing = [package for package in PACKAGES[name] if importlib.util.find_spec(package) is None]
        if missing:
            raise MissingExportPackage(
                f"format {name!r} needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not "
                f"installed: {EXTRA} (or export --format jax, which needs nothing more)"
            )
    return formats


def _traced(program: PolicyProgram) -> tuple[Callable, list[jax.ShapeDtypeStruct]]:
    """The program as a function of the primitives JAX traced it to, with a symbolic batch axis:
    the converter then sees plain operations (no Flax module of its own to map, none of its
    batching rules needed)."""
    (batch,) = jax_export.symbolic_shape(BATCH, scope=jax_export.SymbolicScope())
    abstract = program.abstract_inputs(batch)
    closed = jax.make_jaxpr(program.function)(*abstract)
    return lambda *arrays: _evaluate(closed.jaxpr, closed.consts, *arrays), abstract


REWRITES: dict[str, Callable] = {
    "stack": lambda *xs, axis: jax.lax.concatenate([jax.lax.expand_dims(x, (axis,)) for x in xs], axis),
}
"""Primitives the pinned converter has no rule for (a user's network may use them: ``jnp.stack``),
as primitives it converts: the same values."""


def _evaluate(jaxpr, consts, *arrays) -> list:
    """``jaxpr`` evaluated on ``arrays`` (traced again by the converter), its ``REWRITES`` rewritten,
    nested ``jit`` calls inlined so that theirs are too."""
    values = {}

    def read(var):
        return var.val if isinstance(var, Literal) else values[var]

    values.update(zip(jaxpr.constvars, consts))
    values.update(zip(jaxpr.invars, arrays))
    for eqn in jaxpr.eqns:
        inputs, name = [read(var) for var in eqn.invars], eqn.primitive.name
        if name in REWRITES:
            outputs = [REWRITES[name](*inputs, **eqn.params)]
        elif name in ("pjit", "jit"):
            outputs = _evaluate(eqn.params["jaxpr"].jaxpr, eqn.params["jaxpr"].consts, *inputs)
        else:
            outputs = eqn.primitive.bind(*inputs, **eqn.primitive.get_bind_params(eqn.params))
            outputs = outputs if eqn.primitive.multiple_results else [outputs]
        values.update(zip(eqn.outvars, outputs))
    return [read(var) for var in jaxpr.outvars]


def to_onnx(program: PolicyProgram) -> bytes:
    """The ONNX model (bytes), inputs and outputs named as the program's."""
    with _quiet_converter():
        from jax2onnx import to_onnx as convert

        function, abstract = _traced(program)
        model = convert(
            lambda *arrays: tuple(function(*arrays)),
            abstract,
            model_name="purehr_policy",
            opset=ONNX_OPSET,
            input_names=[spec.name for spec in program.inputs],
            output_names=[spec.name for spec in program.outputs],
        )
    return model.SerializeToString()


@contextlib.contextmanager
def _quiet_converter():
    """jax2onnx logs a warning per plugin of a library it cannot load (dm_pix on this JAX), onnx_ir one
    per constant shape it leaves untyped: not ours to act on."""
    loggers = [logging.getLogger(name) for name in ("jax2onnx", "onnx_ir")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def to_jax_export(program: PolicyProgram) -> tuple[bytes, tuple[str, ...]]:
    """The serialised ``jax.export`` program and the platforms it was lowered for: all of
    ``PLATFORMS`` where this JAX lowers for them, else those it can, CPU always."""
    function, abstract = _traced(program)
    jitted = jax.jit(lambda *arrays: tuple(function(*arrays)))
    candidates = [PLATFORMS, ("cpu", "cuda"), ("cpu", "tpu"), ("cpu",)]
    for platforms in candidates:
        try:
            exported = jax_export.export(jitted, platforms=platforms)(*abstract)
        except Exception:  # a platform this JAX cannot lower for: try fewer
            if platforms == ("cpu",):
                raise
            continue
        return bytes(exported.serialize()), platforms
    raise AssertionError("unreachable")


def onnx_runner(model: bytes, names: Sequence[str]) -> Callable[[Sequence[np.ndarray]], list[np.ndarray]]:
    """``run(inputs) -> outputs`` of an ONNX model in ONNX Runtime (CPU), inputs in ``names`` order."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only: not a warning per constant the converter left unused
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return lambda arrays: session.run(None, dict(zip(names, arrays)))


def jax_export_runner(serialized: bytes) -> Callable[[Sequence[np.ndarray]], list[np.ndarray]]:
    """``run(inputs) -> outputs`` of a deserialised ``jax.export`` program on this backend."""
    exported = jax_export.deserialize(bytearray(serialized))
    call = jax.jit(exported.call)
    return lambda arrays: [np.asarray(value) for value in call(*arrays)]
