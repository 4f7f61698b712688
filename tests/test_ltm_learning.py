"""TD(λ): eligibility traces per task, per-goal values moved toward the outcome."""

from __future__ import annotations

import pytest

from hivemind.ltm.inmemory import InMemoryBackend
from hivemind.ltm.learning import TDParams, ValueLearner, goal_of
from tests.test_ltm_backend import rec


@pytest.fixture
def learner() -> ValueLearner:
    backend = InMemoryBackend()
    backend.add_many([rec("a"), rec("b"), rec("c", goal_values={"g/t": 0.9})])
    return ValueLearner(backend, TDParams(alpha=0.5, lam=0.5, gamma=1.0))


def test_goal_is_domain_slash_task_type() -> None:
    assert goal_of("sql", "date_filter") == "sql/date_filter"
    assert goal_of(None, None) == "general/general"


def test_each_retrieval_decays_older_traces_and_refreshes_the_new(learner: ValueLearner) -> None:
    learner.record_access("t", ["a"])
    learner.record_access("t", ["b"])
    learner.record_access("t", ["b"])
    assert learner.traces("t") == {"a": pytest.approx(0.25), "b": 1.0}


@pytest.mark.parametrize(("success", "direction"), [(True, 1), (False, -1)], ids=["done", "failed"])
def test_values_move_toward_the_outcome_in_proportion_to_the_trace(
    learner: ValueLearner, success: bool, direction: int
) -> None:
    learner.record_access("t", ["a"])
    learner.record_access("t", ["b"])
    updates = learner.end_task("t", "g/t", 1.0 if success else 0.0)
    delta_a = updates["a"][1] - updates["a"][0]
    delta_b = updates["b"][1] - updates["b"][0]
    assert direction * delta_b > direction * delta_a > 0  # recent trace 1.0 moves most
    assert updates["b"] == (0.5, 0.75 if success else 0.25)
    assert learner.traces("t") == {}


def test_values_stay_within_zero_and_one(learner: ValueLearner) -> None:
    learner.params = TDParams(alpha=1.0)
    learner.record_access("t", ["c"])
    assert learner.end_task("t", "g/t", 1.0)["c"][1] == 1.0
    learner.record_access("u", ["c"])
    assert learner.end_task("u", "g/t", 0.0)["c"][1] == 0.0


def test_values_are_kept_per_goal(learner: ValueLearner) -> None:
    learner.record_access("t", ["c"])
    learner.end_task("t", "other/goal", 0.0)
    stored = learner.backend.get("c")
    assert stored is not None
    assert stored.goal_values == {"g/t": 0.9, "other/goal": pytest.approx(0.25)}


def test_td_parameters_outside_zero_one_are_refused() -> None:
    with pytest.raises(ValueError, match="alpha"):
        TDParams(alpha=1.5)
