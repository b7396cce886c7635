"""The training programs' XLA options: level 2 on the CPU, unless PUREHR_XLA_TRAINING_LEVEL or the
user's XLA_FLAGS names a level."""

import jax
import pytest

from purehr.engine.compile_options import (
    CPU_TRAINING_LEVEL,
    LEVEL_FLAG,
    TRAINING_LEVEL_VARIABLE,
    one_shot_compiler_options,
    training_compiler_options,
)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the option is the CPU's")
def test_the_cpu_trains_at_level_2_unless_xla_flags_names_a_level(monkeypatch):
    monkeypatch.delenv(TRAINING_LEVEL_VARIABLE, raising=False)  # the suite's own (conftest)
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
    assert training_compiler_options() == {LEVEL_FLAG: 2} == {LEVEL_FLAG: CPU_TRAINING_LEVEL}
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3")
    assert training_compiler_options() == {}
    monkeypatch.delenv("XLA_FLAGS")
    assert training_compiler_options() == {LEVEL_FLAG: 2}


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the option is the CPU's")
def test_a_named_training_level_wins_over_xla_flags_and_a_bad_one_is_refused(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3")
    monkeypatch.setenv(TRAINING_LEVEL_VARIABLE, "0")
    assert training_compiler_options() == {LEVEL_FLAG: 0}
    assert one_shot_compiler_options() == {LEVEL_FLAG: 1}  # the one-shot programs keep theirs
    monkeypatch.setenv(TRAINING_LEVEL_VARIABLE, "fast")
    with pytest.raises(ValueError, match="PUREHR_XLA_TRAINING_LEVEL='fast': expected an XLA optimisation level, 0, 1"):
        training_compiler_options()


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the option is the CPU's")
def test_the_one_shot_initial_states_compile_at_level_1_whatever_xla_flags_says(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3")
    assert one_shot_compiler_options() == {LEVEL_FLAG: 1}
    monkeypatch.delenv("XLA_FLAGS")
    assert one_shot_compiler_options() == {LEVEL_FLAG: 1}
