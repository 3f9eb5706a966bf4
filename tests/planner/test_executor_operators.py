"""The executor's operator table (planner/executor/core.py `OPERATORS`): every logical plan
node class the planner can build has exactly one operator, and each is an `Executor`
method named after its node (`run_<node>`), so readers and tools find it from the table."""

from __future__ import annotations

import inspect

from planner import logical as L
from planner.executor import OPERATORS, Executor


def _node_classes() -> set[type]:
    return {c for _, c in inspect.getmembers(L, inspect.isclass)
            if issubclass(c, L.Node) and c is not L.Node and c.__module__ == L.__name__}


def test_every_plan_node_has_one_operator():
    assert set(OPERATORS) == _node_classes()


def test_operators_are_executor_methods_named_after_their_node():
    for node, fn in OPERATORS.items():
        assert fn.__name__ == "run_" + node.__name__.lower()
        assert getattr(Executor, fn.__name__) is fn
