"""A linearizability checker for recorded histories (the WGL algorithm, as in Porcupine).

A history is a list of `Operation(client, kind, key, value, call, ret, output)`: `call` and
`ret` are positions on one global event counter; `ret is None` means the client never
learnt the outcome (a timeout, a crashed server): the op may have taken effect at any
point after its call, or never.

`check(history, model)` answers whether some total order of the operations (1) respects
real time: an op that returned before another was called comes first, (2) obeys the
sequential `model`, and (3) contains every op that returned, and possibly some that did
not. The map is checked one key at a time (linearizability is compositional: P-
compositionality), each key by Wing & Gong's search with Lowe's memoization:

    events = every call and return, in time order, in a doubly linked list
    walk the list:
      a call:   try to linearize its op now (model accepts it, and (set of linearized ops,
                state) was not explored before): unlink its call and return, push, restart
                from the head; otherwise move on
      a return: its op was not linearized before it returned: backtrack (pop the last op,
                relink it, continue after its call)
      an unknown op's return (placed after all others): everything that returned is
                linearized: success
    empty stack at a return: not linearizable.

`RegisterModel` is a register per key with put(v) and get() -> v (None before any put).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Hashable


@dataclasses.dataclass
class Operation:
    client: int
    kind: str  # "put" | "get"
    key: Hashable
    value: Any
    call: int
    ret: int | None = None
    output: Any = None


class RegisterModel:
    init: Hashable = None

    @staticmethod
    def step(state: Hashable, op: Operation) -> tuple[bool, Hashable]:
        if op.kind == "put":
            return True, op.value
        if op.kind == "get":
            return op.output == state, state
        raise ValueError(f"unknown register op {op.kind!r}")


class _Node:
    __slots__ = ("op_i", "is_call", "match", "prev", "next", "time")

    def __init__(self, op_i: int, is_call: bool, time: float):
        self.op_i = op_i
        self.is_call = is_call
        self.time = time
        self.match: _Node | None = None
        self.prev: _Node | None = None
        self.next: _Node | None = None


def _check_one(ops: list[Operation], init: Hashable,
               step: Callable[[Hashable, Operation], tuple[bool, Hashable]],
               max_states: int) -> bool | None:
    inf = float("inf")
    nodes: list[_Node] = []
    for i, op in enumerate(ops):
        c = _Node(i, True, op.call)
        r = _Node(i, False, inf if op.ret is None else op.ret)
        c.match, r.match = r, c
        nodes += [c, r]
    # calls before returns at equal times (an op returning at t overlaps one called at t)
    nodes.sort(key=lambda n: (n.time, not n.is_call))
    head = _Node(-1, False, -1.0)
    prev = head
    for n in nodes:
        prev.next, n.prev = n, prev
        prev = n

    def lift(c: _Node) -> None:
        c.prev.next = c.next
        if c.next is not None:
            c.next.prev = c.prev
        r = c.match
        r.prev.next = r.next
        if r.next is not None:
            r.next.prev = r.prev

    def unlift(c: _Node) -> None:
        r = c.match
        r.prev.next = r
        if r.next is not None:
            r.next.prev = r
        c.prev.next = c
        if c.next is not None:
            c.next.prev = c

    state = init
    linearized = 0
    seen: set[tuple[int, Hashable]] = set()
    stack: list[tuple[_Node, Hashable]] = []
    entry = head.next
    while entry is not None:
        if entry.is_call:
            ok, new_state = step(state, ops[entry.op_i])
            key = (linearized | (1 << entry.op_i), new_state)
            if ok and key not in seen:
                seen.add(key)
                if len(seen) > max_states:
                    return None
                stack.append((entry, state))
                state, linearized = new_state, key[0]
                lift(entry)
                entry = head.next
            else:
                entry = entry.next
        elif entry.time == inf:
            return True  # only ops with unknown outcomes remain
        else:
            if not stack:
                return False
            c, state = stack.pop()
            linearized &= ~(1 << c.op_i)
            unlift(c)
            entry = c.next
    return True


def check(history: list[Operation], model=RegisterModel, max_states: int = 2_000_000
          ) -> tuple[bool | None, Hashable | None]:
    """(True, None) if linearizable; (False, key) naming a key whose history is not;
    (None, key) if the search for that key exceeded `max_states`."""
    by_key: dict[Hashable, list[Operation]] = {}
    for op in history:
        if op.kind == "get" and op.ret is None:
            continue  # a read nobody saw has no effect
        by_key.setdefault(op.key, []).append(op)
    for key in sorted(by_key, key=repr):
        ok = _check_one(by_key[key], model.init, model.step, max_states)
        if ok is not True:
            return ok, key
    return True, None
