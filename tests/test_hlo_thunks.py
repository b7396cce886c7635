# ruff: noqa: E501
"""benchmarks/_hlo_thunks.py's reading of optimised HLO text: stack frames and thunks by part,
on a hand-written module whose counts are known (no compilation)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _hlo_thunks as hlo_thunks  # noqa: E402

# An update loop (3 trips) whose body has: a rollout loop of 4 trips (2 fusions of env_step, a
# frameless copy, the scan's stacking), a threefry hash loop of 5 trips (1 fusion), and 2
# fusions of the update itself; frames: 1 update, 2 env_step inside update, 3 a threefry
# draw inside update, 4 the rollout scan's call site in update.
MODULE = """HloModule m

%hash_body (p: u32[]) -> u32[] {
  %p = u32[] parameter(0)
  ROOT %f = u32[] fusion(%p), kind=kLoop, calls=%x, metadata={op_name="jit(f)/threefry2x32" stack_frame_id=3}
}

%hash_cond (p: u32[]) -> pred[] {
  %p = u32[] parameter(0)
  ROOT %c = pred[] compare(%p, %p), direction=LT
}

%step_body (p: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  %a = f32[] fusion(%p), kind=kLoop, calls=%x, metadata={op_name="jit(f)/env/add" stack_frame_id=2}
  %b = f32[] fusion(%a), kind=kLoop, calls=%x, metadata={op_name="jit(f)/env/mul" stack_frame_id=2}
  %c = f32[] copy(%b)
  ROOT %d = f32[] fusion(%c), kind=kLoop, calls=%x, metadata={op_name="jit(f)/jit(dynamic_update_index_in_dim)/dynamic_update_slice" stack_frame_id=1}
}

%step_cond (p: f32[]) -> pred[] {
  %p = f32[] parameter(0)
  ROOT %c = pred[] compare(%p, %p), direction=LT
}

%update_body (p: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  %w = f32[] while(%p), condition=%step_cond, body=%step_body, metadata={op_name="jit(f)/while" stack_frame_id=4}, backend_config={"known_trip_count":{"n":"4"}}
  %h = u32[] while(%w), condition=%hash_cond, body=%hash_body, metadata={op_name="jit(f)/jit(_threefry_split)/while" stack_frame_id=3}, backend_config={"known_trip_count":{"n":"5"}}
  %u = f32[] fusion(%w), kind=kLoop, calls=%x, metadata={op_name="jit(f)/sub" stack_frame_id=1}
  ROOT %v = f32[] fusion(%u), kind=kLoop, calls=%x, metadata={op_name="jit(f)/div" stack_frame_id=1}
}

%update_cond (p: f32[]) -> pred[] {
  %p = f32[] parameter(0)
  ROOT %c = pred[] compare(%p, %p), direction=LT
}

ENTRY %main (p: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  ROOT %w = f32[] while(%p), condition=%update_cond, body=%update_body, backend_config={"known_trip_count":{"n":"3"}}
}

FileNames
1 "/src/algo.py"
2 "/site/jax/random.py"

FunctionNames
1 "train"
2 "make.<locals>.update"
3 "make.<locals>.env_step"
4 "split"

FileLocations
1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=1 end_column=2}
2 {file_name_id=1 function_name_id=2 line=20 end_line=20 column=1 end_column=2}
3 {file_name_id=1 function_name_id=3 line=30 end_line=30 column=1 end_column=2}
4 {file_name_id=2 function_name_id=4 line=40 end_line=40 column=1 end_column=2}
5 {file_name_id=1 function_name_id=2 line=25 end_line=25 column=1 end_column=2}

StackFrames
1 {file_location_id=2 parent_frame_id=0}
2 {file_location_id=3 parent_frame_id=2}
3 {file_location_id=4 parent_frame_id=2}
4 {file_location_id=5 parent_frame_id=0}
"""

RULES = [(r"algo\.py:.*env_step:", "rollout step"), (r"algo\.py:make\.<locals>\.update:", "update")]


def test_frame_chains_read_innermost_first_with_parents_one_based():
    chains = hlo_thunks.frame_chains(MODULE)
    assert chains[2] == [("/src/algo.py", "make.<locals>.env_step", 30), ("/src/algo.py", "make.<locals>.update", 20)]
    assert chains[3] == [("/site/jax/random.py", "split", 40), ("/src/algo.py", "make.<locals>.update", 20)]
    assert chains[1] == [("/src/algo.py", "make.<locals>.update", 20)]


def test_parts_splits_one_update_by_loop_and_frame():
    body = hlo_thunks.heaviest_entry_loop(MODULE)
    assert body == "update_body"
    counted = hlo_thunks.parts(MODULE, RULES, body)
    # rollout: 4 trips x (2 env_step fusions + the frameless copy + the stacking + the condition)
    # + the while itself; the hash loop: 5 trips x (1 + condition) + its while; the update: 2.
    assert counted == {"rollout step": 4 * 5 + 1, "update: hash loops": 5 * 2 + 1, "update": 2}
    assert sum(counted.values()) == sum(hlo_thunks.kinds(MODULE, body).values())
