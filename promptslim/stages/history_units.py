"""The history stage's units of trimming: tool-call atoms grouped into turns, with their
token split, and the small planning helpers over them (see ``history.py``'s docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise
from operator import attrgetter

from ..budget import _any_pinned
from ..errors import BudgetInfeasible
from ..messages import Message
from ..request import Budget, Request

__all__: list[str] = []


@dataclass(slots=True)
class _Unit:
    """One unit of trimming, ``messages[first:stop]`` (units partition the span in order), and
    its token split. ``atoms`` (lists of message indices) and which of them are pinned are
    None from ``_turn_units``, which runs only when nothing is pinned: they are read only
    where something is."""

    first: int
    stop: int
    droppable: int = 0  # tokens of unpinned atoms
    pinned: int = 0  # tokens of pinned atoms
    atoms: list[list[int]] | None = None
    pinned_atoms: list[bool] | None = None


def _atoms(messages: Sequence[Message], start: int, end: int) -> list[list[int]]:
    """Message indices grouped so that an assistant's tool calls and their results are one
    atom. A result joins the atom of the call it answers, with everything between (parallel
    calls answered around an assistant note); a result with no known call (an orphan, or a
    legacy ``function`` message) joins the atom before it. So a tool result can never lead the
    kept history, nor outlive its call."""
    atoms: list[list[int]] = []
    call_atom: dict[str, int] = {}  # tool call id -> index of the atom that made the call
    for i in range(start, end):
        m = messages[i]
        if m.role in ("tool", "function") and atoms:
            home = call_atom.get(m.tool_call_id or "", len(atoms) - 1)
            if home < len(atoms) - 1:  # answered after other messages: they join the round
                atoms[home:] = [[j for atom in atoms[home:] for j in atom]]
                for call_id, at in call_atom.items():  # calls made in the merged atoms
                    if at > home:
                        call_atom[call_id] = home
            atoms[-1].append(i)
        else:
            atoms.append([i])
        for call in m.tool_calls or ():
            call_atom[call.id] = len(atoms) - 1
    return atoms


def _units(
    messages: Sequence[Message],
    atoms: list[list[int]],
    pinned: set[int],
    start_on: str,
    tokens_of: Sequence[int],
) -> list[_Unit]:
    """Atoms grouped into units; ``tokens_of[i]`` is message ``i``'s ``count_message``."""
    units: list[_Unit] = []
    unit = _Unit(0, 0)
    unit_atoms: list[list[int]] = []
    unit_pins: list[bool] = []
    by_atom = start_on == "any"
    for atom in atoms:
        first = atom[0]
        if not units or by_atom or messages[first].role == "user":
            unit_atoms, unit_pins = [], []
            unit = _Unit(first, first, 0, 0, unit_atoms, unit_pins)
            units.append(unit)
        unit.stop = atom[-1] + 1
        if len(atom) == 1:  # most atoms: no generator needed
            is_pinned = first in pinned
            tokens = tokens_of[first]
        else:
            is_pinned = not pinned.isdisjoint(atom)
            tokens = sum(tokens_of[i] for i in atom)
        unit_atoms.append(atom)
        unit_pins.append(is_pinned)
        if is_pinned:
            unit.pinned += tokens
        else:
            unit.droppable += tokens
    return units


def _turn_units(
    messages: Sequence[Message], start: int, end: int, tokens_of: Sequence[int]
) -> list[_Unit] | None:
    """``_units(messages, _atoms(messages, start, end), set(), "user", tokens_of)`` in one
    pass, for the common case (nothing pinned, whole turns), without the atoms: the two passes
    and their per-atom bookkeeping were over a quarter of a warm request. None when a tool
    result answers a call made before the atom just built (the general path merges atoms then)."""
    firsts: list[int] = []  # each unit's first message
    atoms = 0
    made: dict[str, int] = {}  # tool call id -> number of the atom that made the call
    for i in range(start, end):
        m = messages[i]
        role = m.role
        if (role == "tool" or role == "function") and atoms:
            if made and made.get(m.tool_call_id or "", atoms) != atoms:
                return None
        else:
            atoms += 1
            if role == "user" or not firsts:
                firsts.append(i)
        calls = m.tool_calls
        if calls:
            for call in calls:
                made[call.id] = atoms
    sums = list(accumulate(tokens_of[start:end], initial=0))
    firsts.append(end)
    return [_Unit(a, b, sums[b - start] - sums[a - start]) for a, b in pairwise(firsts)]


def _quantize(n: int) -> int:
    """``n`` rounded down to 8 steps per power of two (2,460 -> 2,304; 1,000 -> 960)."""
    if n < 64:
        return n
    step = 1 << (n.bit_length() - 4)
    return n // step * step


def _first_fit(suffix: list[int], room: int) -> int:
    """The smallest unit index whose suffix fits ``room`` (the span's end always does)."""
    for i, tokens in enumerate(suffix):
        if tokens <= room:
            return i
    return len(suffix) - 1


def _unpinned(units: list[_Unit], a: int, b: int) -> list[int]:
    if a >= b:
        return []
    # a unit's pinned tokens are 0 only when it has no pinned atom (a message counts at least
    # MESSAGE_OVERHEAD); without one, units are contiguous runs of messages
    if not any(map(_PINNED_TOKENS, units[a:b])):
        return list(range(units[a].first, units[b - 1].stop))
    return [
        i
        for unit in units[a:b]
        for atom, is_pinned in zip(unit.atoms or (), unit.pinned_atoms or ())
        if not is_pinned
        for i in atom
    ]


_PINNED_TOKENS = attrgetter("pinned")  # of a _Unit
_DROPPABLE = attrgetter("droppable")


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    """Sorted indices as half-open contiguous runs: [1, 2, 3, 7] -> [(1, 4), (7, 8)]."""
    runs: list[tuple[int, int]] = []
    for i in indices:
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return runs


def _pinned(request: Request, start: int, end: int, pin_first_user: bool) -> set[int]:
    """The span's messages that must stay: pinned ones, calls answered after the last user
    message, and the first user message with ``pin_first_user``."""
    messages = request.messages
    pinned: set[int] = set()
    if _any_pinned(request, start, end):
        pinned = {i for i in range(start, end) if messages[i].pinned}
    # a call whose result comes after the last user message (kept whole) must stay too
    answered = {m.tool_call_id for m in messages[end:] if m.tool_call_id}
    if answered:
        pinned.update(
            i
            for i in range(start, end)
            if any(c.id in answered for c in messages[i].tool_calls or ())
        )
    if pin_first_user:
        first = next((i for i, m in enumerate(messages) if m.role == "user"), None)
        if first is not None and start <= first < end:
            pinned.add(first)
    return pinned


def _check_feasible(fixed: int, pinned_tokens: int, budget: Budget) -> None:
    if budget.total is not None and fixed + pinned_tokens > budget.total:
        raise BudgetInfeasible(
            "the stable prefix, the last user message and the pinned messages alone "
            "exceed the budget",
            minimum=fixed + pinned_tokens,
            budget=budget.total,
        )
    if budget.history is not None and pinned_tokens > budget.history:
        raise BudgetInfeasible(
            "the pinned history messages alone exceed budget.history",
            minimum=pinned_tokens,
            budget=budget.history,
        )
