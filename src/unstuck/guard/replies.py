"""Reply ordering: the calls of one model reply are assessed exactly once, in the order the
model gave them, however a framework runs and reports them.
Internal: not a supported import path (docs/reference/index.md lists those that are).

A result that arrives before an earlier call of its reply has been assessed waits for it (at
most :data:`REPLY_WAIT_S`); a refusal that comes before its turn is queued and assessed when
the reply reaches it. Only an earlier call already under way holds a call back: one never
begun cannot deadlock the reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from unstuck.core.errors import UnstuckError
from unstuck.core.situations import Situation, validate_situation
from unstuck.core.tools import ToolCall
from unstuck.guard.decision import Decision

__all__ = [
    "REPLY_WAIT_S",
    "QueuedRefusal",
    "Reply",
    "ReplyBooks",
    "ReplyOrder",
]

#: Seconds a result waits for an earlier call of its reply to be assessed before it is
#: assessed anyway (a framework that never reports that call must not hang the turn).
REPLY_WAIT_S = 30.0


@dataclass(frozen=True, slots=True)
class QueuedRefusal:
    """A call refused before its turn in the reply, assessed when the reply reaches it."""

    call: ToolCall
    situation: Situation
    subject: str
    interactive: bool


@dataclass(slots=True)
class Reply:
    """One model reply's calls, assessed in order."""

    seq: int
    ids: list[str]
    position: int = 0  # calls before it have been assessed
    begun: set[str] = field(default_factory=set)  # dispatched (in flight) or refused
    refusals: dict[str, QueuedRefusal] = field(default_factory=dict)
    fresh: frozenset[str] = frozenset()  # blockers first opened by this reply's calls
    declared: bool = True  # by Guard.reply(); False: a call seen alone made it
    refused: dict[str, Decision] = field(default_factory=dict)  # refusals already given, by call id (not saved)

    def to_dict(self) -> dict[str, Any]:
        """The saved form (JSON types)."""
        return {"seq": self.seq, "ids": self.ids, "position": self.position, "begun": sorted(self.begun),
                "fresh": sorted(self.fresh), "declared": self.declared,
                "refusals": [[q.call.id, q.call.tool, q.call.arguments_json, q.situation.to_dict(), q.subject,
                              q.interactive] for q in self.refusals.values()]}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Reply:
        """Read :meth:`to_dict`'s output back.

        Raises:
            ValueError: naming the part, when ``ids`` or ``begun`` is no list or a queued
                refusal has no situation.
        """
        if not (isinstance(raw.get("ids"), list) and isinstance(raw.get("begun"), list)):
            raise ValueError("reply.ids and reply.begun must be lists")
        reply = cls(int(raw["seq"]), [str(i) for i in raw["ids"]], int(raw["position"]), set(map(str, raw["begun"])),
                    fresh=frozenset(map(str, raw["fresh"])), declared=bool(raw.get("declared", True)))
        for cid, tool_name, arguments, situation, subject, interactive in raw.get("refusals", []):
            refusal = validate_situation("saved state", situation, allow_refusal=True)
            if refusal is None:
                raise ValueError("a queued refusal has no situation")
            reply.refusals[str(cid)] = QueuedRefusal(ToolCall(str(cid), str(tool_name), str(arguments)), refusal,
                                                     str(subject), bool(interactive))
        return reply


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ReplyBooks(Protocol):
    """The part of the guard's saved state the reply order keeps (the fields of
    :class:`unstuck.guard.state.GuardState` of the same names): the replies declared so far, the
    one in progress, the decisions already given in it, and the retries pending."""

    replies: int
    reply: Reply | None
    done: dict[tuple[int, str], Decision]
    retrying: dict[str, int]


class ReplyOrder:
    """The order of the reply in progress (kept in the guard's :class:`~unstuck.guard.state.GuardState`:
    ``replies``, ``reply``, ``done``), under the guard's lock.

    Args:
        state: the guard's state.
        lock: the guard's lock (held by every caller of these methods).
        assess_refusal: assesses a queued refusal once the reply reaches it.
    """

    def __init__(self, state: ReplyBooks, lock: threading.RLock,
                 assess_refusal: Callable[[Reply, QueuedRefusal], object]) -> None:
        self.state = state
        self.assess_refusal = assess_refusal
        self.changed = threading.Condition(lock)
        self._waiting = 0  # threads in wait_turn (counted under the lock): nobody to wake when 0
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def declare(self, calls: Sequence[ToolCall], seq: int | None = None) -> int:
        """Start the reply of ``calls`` (see :meth:`unstuck.guard.guard.Guard.reply`); its number.

        Raises:
            UnstuckError: when two calls share an id.
        """
        ids = [c.id for c in calls]
        if len(set(ids)) != len(ids):
            repeated = sorted({i for i in ids if ids.count(i) > 1})
            raise UnstuckError(f"the calls of one reply need distinct ids; repeated: {', '.join(repeated)} "
                               "(unstuck.core.tools.unique_call_ids renames them)")
        s = self.state
        number = s.replies if seq is None else seq
        s.replies = max(s.replies, number) + 1
        s.reply = Reply(number, ids)
        s.done = {}
        self.notify()
        return number

    def of(self, call: ToolCall, *, fresh: bool = False) -> Reply:
        """The reply ``call`` belongs to: the declared one when it lists the call (or, while
        that reply is still in progress, one it did not list: it joins at the end); else a
        reply of its own. ``fresh`` (a new :meth:`Guard.before <unstuck.guard.guard.Guard.before>`):
        an id already assessed in the reply is a new call that reuses the id (frameworks that
        number calls per reply)."""
        s = self.state
        reply = s.reply
        if reply is not None and call.id in reply.ids:
            earlier = reply.refused.get(call.id)
            reused = (reply.seq, call.id) in s.done or (
                earlier is not None and earlier.call is not None and earlier.call.arguments_json != call.arguments_json)
            if not (fresh and reused and call.id not in s.retrying):
                return reply
        elif reply is not None and reply.declared and reply.position < len(reply.ids):
            reply.ids.append(call.id)
            return reply
        # a reply of its own: what declare([call]) does, then not declared by Guard.reply()
        number = s.replies
        s.replies = number + 1
        s.reply = alone = Reply(number, [call.id], declared=False)
        s.done = {}
        self.notify()
        return alone

    def given(self, reply: Reply, call_id: str) -> Decision | None:
        """The decision already given for ``call_id`` in ``reply`` (a call reported twice is
        assessed once), unless a retry of it is pending."""
        if call_id in self.state.retrying:
            return None
        return self.state.done.get((reply.seq, call_id))

    def my_turn(self, reply: Reply, call_id: str) -> bool:
        """Every call of ``reply`` before ``call_id`` that is under way has been assessed."""
        if reply is not self.state.reply or call_id not in reply.ids:
            return True
        index = reply.ids.index(call_id)
        if index <= reply.position:
            return True
        # only earlier calls already under way hold it back: one never begun cannot deadlock it
        return not any(earlier in reply.begun for earlier in reply.ids[reply.position:index])

    def wait_turn(self, reply: Reply, call_id: str) -> None:
        """Block until :meth:`my_turn` (at most :data:`REPLY_WAIT_S` of real time: a frozen
        turn clock must not hang it)."""
        if self.my_turn(reply, call_id):
            return
        deadline = time.monotonic() + REPLY_WAIT_S
        self._waiting += 1
        try:
            while not self.my_turn(reply, call_id) and time.monotonic() < deadline:
                self.changed.wait(timeout=min(REPLY_WAIT_S, 1.0))
        finally:
            self._waiting -= 1

    async def in_turn(self, call: ToolCall, then: Callable[[Reply], Decision]) -> Decision:
        """``then(reply)``, under the lock, once it is ``call``'s turn (at most
        :data:`REPLY_WAIT_S` later), waiting without blocking the event loop."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REPLY_WAIT_S
        while True:
            with self.changed:
                reply = self.of(call)
                if self.my_turn(reply, call.id) or loop.time() > deadline:
                    return then(reply)
                future: asyncio.Future[None] = loop.create_future()
                self._async_waiters.append((loop, future))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(future, timeout=max(deadline - loop.time(), 0.0))

    def assessed(self, reply: Reply, call_id: str, decision: Decision | None = None) -> None:
        """``call_id`` has been assessed (``decision`` is what a second report of it gets):
        move the reply on, assessing refusals that are next."""
        if decision is not None:
            self.state.done[(reply.seq, call_id)] = decision
        if reply is not self.state.reply or call_id not in reply.ids:
            return
        reply.position = max(reply.position, reply.ids.index(call_id) + 1)
        while reply.position < len(reply.ids) and reply.ids[reply.position] in reply.refusals:
            self.assess_refusal(reply, reply.refusals.pop(reply.ids[reply.position]))
            reply.position += 1
        self.notify()

    def notify(self) -> None:
        """Wake every call waiting for its turn."""
        if self._waiting:
            self.changed.notify_all()
        if not self._async_waiters:
            return
        waiters, self._async_waiters = self._async_waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # a closed loop has nobody waiting
                loop.call_soon_threadsafe(_wake, future)
