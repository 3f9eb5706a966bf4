"""The executor's operator table (planner/executor/core.py `OPERATORS`): every logical plan
node class the planner can build has exactly one operator, and each is a method of one of
the Executor's parts named after its node (`run_<node>`), so readers and tools find it from
the table."""

from __future__ import annotations

import inspect

from planner import logical as L
from planner.executor import OPERATORS, Executor


def _node_classes() -> set[type]:
    return {c for _, c in inspect.getmembers(L, inspect.isclass)
            if issubclass(c, L.Node) and c is not L.Node and c.__module__ == L.__name__}


def test_every_plan_node_has_one_operator():
    assert set(OPERATORS) == _node_classes()


def test_operators_are_methods_of_executor_parts_named_after_their_node():
    ex = Executor(None)
    for node, (part, fn) in OPERATORS.items():
        assert fn.__name__ == "run_" + node.__name__.lower()
        assert getattr(type(ex.parts[part]), fn.__name__) is fn
