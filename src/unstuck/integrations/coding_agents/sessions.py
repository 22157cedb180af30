"""One guard per coding-agent session: each hook event through the public :class:`unstuck.Guard`
of its session, and the reply the agent gets (issue 26, deliver 2).
Internal: not a supported import path (docs/reference/index.md lists those that are).

A session is ``(agent, session id)``. Its guard is made at the session's first event and kept
while the guard server runs; its turn is journaled like any other turn (the turn's id
``AGENT-SESSION`` then ``-2``, ``-3`` … for each later stretch: Claude Code's ``Stop`` ends a turn,
the user's next prompt in the same session starts another), so ``unstuck journal list``,
``unstuck report`` and ``unstuck lessons`` show hook sessions beside the others. A server that
restarts finds a session's running turn in the journal, claims it and carries on from its steps
(:meth:`unstuck.Guard.from_journal`).

The keeper journals a session's turn itself (its start, its steps after every event as a riding
commit, its end as a synced one) rather than handing the journal to the guard: the guard would
also journal an *effect intent*, synced to disk, before every write call, which exists so that
a resumed turn never runs an effect twice; unstuck never runs nor re-runs a coding agent's calls
(the agent does), so for hook sessions that fsync would buy nothing and cost a disk sync per
shell command. A turn carried on after a restart is the exception: the guard rebuilt from the
journal journals as it always does.

Events, in the guard's words (:class:`SessionKeeper`):

* **session start**: the lessons about this machine whose environment still matches are
  probed, and those that still hold are added as context (a lesson whose probe comes back clean
  is closed and not shown);
* **pre-tool**: :meth:`Guard.before`: a refusal (rule 1 when unattended, a held write) denies
  the call with the guard's text; a lesson whose probe says its subject is still blocked stops
  the session at once (the call never runs), and so does any call once the session escalated
  (the latch): an agent that cannot be stopped where the escalation happened (Claude Code
  2.1.332 ignores ``continue: false`` from ``PostToolUseFailure``) is stopped at its next call;
* **post-tool** and **post-failure**: :meth:`Guard.after` with the agent's output; guidance the
  guard adds is context; an escalation stops the session;
* **stop**: a session stopping with a blocker open does not read as done: the open blocker is
  escalated and the question is the stop's reason; otherwise the turn ends ``done``.

Who answers: unattended (the hook client's ``--unattended``, or what the agent or a CI variable
said, :attr:`HookEvent.unattended_hint`) the session stops with the question. Attended, the
escalation is published (:meth:`SessionKeeper.subscribe`, the server's event stream) and the
hook waits for the user's answer from another terminal (``unstuck answer SESSION
done|skip|stop``) at most ``ask_wait_s`` seconds: "done" runs the blocker's probe and lets the
session go on when it comes back clean.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import queue
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unstuck.decide.escalation import Answer, Escalation
from unstuck.decide.marks import neutralise
from unstuck.decide.outcome import TurnStatus
from unstuck.decide.policy import Action, PolicyConfig
from unstuck.decide.prompts import GUIDANCE_PREFIX, KNOWN_BLOCKERS_HEADING
from unstuck.guard.decision import Decision
from unstuck.guard.guard import Guard
from unstuck.guard.lessons import known_blocker_note
from unstuck.integrations.coding_agents.events import Agent, AgentHooks, HookAction, HookEvent, HookKind, HookReply
from unstuck.integrations.coding_agents.tools import SETUP_PROBE_TOOL, AgentToolset
from unstuck.store.journal import Journal, JournalError
from unstuck.store.lessons import LessonStore
from unstuck.toolkit.workspace import Workspace, cli_fingerprint, standard_tools

__all__ = [
    "AGENT_TITLES",
    "ASK_WAIT_S",
    "MAX_SESSIONS",
    "HookOutcome",
    "SessionKeeper",
    "event_json",
    "hooks_for",
    "turn_id_of",
]

#: Seconds an attended session's hook waits for the user's answer before it stops the session.
ASK_WAIT_S = 300.0
#: Sessions kept in memory at most (the oldest ended ones are let go first).
MAX_SESSIONS = 1000
#: How each agent is named in a guard's task ("the Claude Code session … in /repo").
AGENT_TITLES: Mapping[Agent, str] = {Agent.CLAUDE_CODE: "Claude Code", Agent.CODEX: "Codex CLI",
                                     Agent.GEMINI: "Gemini CLI"}
#: The module of each agent's mapping (its ``HOOKS``).
_MAPPINGS: Mapping[Agent, str] = {
    Agent.CLAUDE_CODE: "unstuck.integrations.coding_agents.claude_code",
    Agent.CODEX: "unstuck.integrations.coding_agents.codex",
    Agent.GEMINI: "unstuck.integrations.coding_agents.gemini",
}
_PLAIN_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def hooks_for(agent: Agent) -> AgentHooks:
    """The hook mapping of ``agent`` (its module's ``HOOKS``).

    Raises:
        LookupError: the mapping is not part of this build.
    """
    import importlib

    try:
        module = importlib.import_module(_MAPPINGS[agent])
    except ModuleNotFoundError as exc:
        raise LookupError(f"unstuck has no hook mapping for {agent.value} in this build") from exc
    found: AgentHooks = module.HOOKS
    return found


def turn_id_of(agent: Agent, session_id: str, stretch: int = 1) -> str:
    """The journal's turn id of a session's ``stretch`` (1, 2, …): ``AGENT-SESSION`` (then
    ``-N``); a session id that is not a plain token of at most 64 characters is replaced by
    the first 16 hex digits of its SHA-256."""
    plain = session_id if _PLAIN_ID.fullmatch(session_id) else hashlib.sha256(session_id.encode()).hexdigest()[:16]
    base = f"{agent.value}-{plain}"
    return base if stretch == 1 else f"{base}-{stretch}"


@dataclass(frozen=True, slots=True)
class HookOutcome:
    """What the server sends back for one hook: the agent's stdout and exit code, or, for an
    attended session that is asking its user, a ``wait`` token (the hook client then waits
    for the answer with :meth:`SessionKeeper.wait`)."""

    stdout: str = ""
    exit_code: int = 0
    wait: str | None = None


@dataclass
class _Session:
    """One live session (mutable: it lives in the keeper, behind its lock)."""

    agent: Agent
    session_id: str
    hooks: AgentHooks
    guard: Guard
    stretch: int
    unattended: bool
    hint: str | None
    lock: threading.RLock = field(default_factory=threading.RLock)
    ended: bool = False
    answer: Answer | None = None
    answered: threading.Condition = field(default_factory=threading.Condition)
    asking: dict[str, HookEvent] = field(default_factory=dict)  # wait token → the event that is asking
    calls: int = 0
    last_question: Escalation | None = None  # the question answered last (shown again on a stop)
    saved: int = 0  # steps the keeper journaled
    journaled: bool = False  # the keeper began the turn in the journal (the guard has none of its own)
    note: str = ""  # the guard's note for the model after the user's answer


class SessionKeeper:
    """The sessions of one guard server (see the module doc).

    Args:
        journal: where each session's turns are journaled (``None``: not kept).
        lessons: the lesson store (``None``: no lessons).
        ask_wait_s: seconds an attended session waits for its user's answer.
        config: the guard's budgets (:class:`~unstuck.decide.policy.PolicyConfig`).
    """

    def __init__(self, journal: Journal | None, lessons: LessonStore | None, *, ask_wait_s: float = ASK_WAIT_S,
                 config: PolicyConfig | None = None) -> None:
        self.journal, self.lessons = journal, lessons
        self.ask_wait_s = ask_wait_s
        self.config = config
        self._sessions: dict[tuple[Agent, str], _Session] = {}
        self._lock = threading.Lock()
        self._subscribers: list[queue.Queue[dict[str, Any]]] = []

    def warm(self) -> None:
        """Load what the first real hook would otherwise wait for (the shell parser's grammar, the
        classifier's tables, the interactive-call catalogue): one pretend session, never
        journaled, a call refused and one failed call assessed."""
        from unstuck.core.tools import CommandOutput, ToolCall
        from unstuck.integrations.coding_agents.claude_code import HOOKS
        from unstuck.toolkit.specs import Toolset

        guard = Guard(Toolset([HOOKS.tool_spec("Bash")]), unattended=True, task="warm-up")
        for number, (line, out) in enumerate((("gh auth login --web", None),
                                              ("gh repo view cli/cli", CommandOutput(
                                                  "gh repo view cli/cli", 4, "", "To get started with GitHub CLI, "
                                                  "please run:  gh auth login")))):
            call = ToolCall.of(f"warm{number}", "Bash", {"command": line})
            if guard.before(call).action is Action.DISPATCH and out is not None:
                guard.after(call, out)

    # -- the event stream ----------------------------------------------------------------------

    def subscribe(self) -> queue.Queue[dict[str, Any]]:
        """A queue that gets every attended session's escalation (``{"event": "escalation",
        "agent", "session", "turn", "subject", "blocked", "user_action", "next_step", "unblock",
        "text"}``) and every answer (``{"event": "answered", ...}``) from now on; the open
        questions are put in it first."""
        box: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._lock:
            self._subscribers.append(box)
            open_now = [s for s in self._sessions.values() if s.asking and s.guard.escalation is not None]
        for session in open_now:
            assert session.guard.escalation is not None
            box.put(self._escalation_event(session, session.guard.escalation))
        return box

    def unsubscribe(self, box: queue.Queue[dict[str, Any]]) -> None:
        """Stop putting events in ``box``."""
        with self._lock:
            if box in self._subscribers:
                self._subscribers.remove(box)

    @property
    def watchers(self) -> int:
        """Open event streams."""
        with self._lock:
            return len(self._subscribers)

    def _publish(self, item: dict[str, Any]) -> None:
        with self._lock:
            boxes = list(self._subscribers)
        for box in boxes:
            box.put(item)

    def _escalation_event(self, session: _Session, escalation: Escalation) -> dict[str, Any]:
        return {"event": "escalation", "agent": session.agent.value, "session": session.session_id,
                "turn": session.guard.turn_id, "subject": escalation.subject, "blocked": escalation.blocked,
                "user_action": escalation.user_action, "next_step": escalation.next_step,
                "unblock": escalation.unblock, "text": escalation.text}

    # -- sessions ------------------------------------------------------------------------------

    def sessions(self) -> list[dict[str, Any]]:
        """Each live session: agent, session id, turn, attended, calls, whether it is asking,
        and the question when it escalated."""
        with self._lock:
            live = list(self._sessions.values())
        shown = []
        for s in live:
            escalation = s.guard.escalation
            shown.append({"agent": s.agent.value, "session": s.session_id, "turn": s.guard.turn_id,
                          "attended": not s.unattended, "unattended_hint": s.hint, "calls": s.calls,
                          "ended": s.ended, "asking": bool(s.asking),
                          "question": escalation.text if escalation is not None else None})
        return shown

    def _workspace(self, event: HookEvent, env: Mapping[str, str]) -> Workspace:
        root = Path(event.cwd) if event.cwd and os.path.isdir(event.cwd) else Path("/")
        return Workspace(root, dict(env) if env else dict(os.environ))

    def _new_guard(self, hooks: AgentHooks, event: HookEvent, env: Mapping[str, str], stretch: int,
                   unattended: bool) -> Guard:
        workspace = self._workspace(event, env)
        own = [standard_tools(workspace)[SETUP_PROBE_TOOL]]
        environ = dict(workspace.env)

        def spec_of(name: str) -> Any:
            spec = hooks.tool_spec(name)
            return dataclasses.replace(spec, environ=environ) if spec.command_argument is not None else spec

        tools = AgentToolset(own, spec_of)
        title = AGENT_TITLES.get(hooks.agent, hooks.agent.value)
        task = f"the {title} session {event.session_id[:12]}" + (f" in {event.cwd}" if event.cwd else "")
        turn_id = turn_id_of(hooks.agent, event.session_id, stretch)
        options: dict[str, Any] = {
            "lessons": self.lessons,
            "fingerprint": functools.partial(cli_fingerprint, workspace) if self.lessons is not None else None,
        }
        if self.journal is not None and stretch > 0:
            try:
                header = self.journal.turn(turn_id)
            except JournalError:
                header = None
            if header is not None and not header.status.ended:
                self.journal.claim(turn_id)  # its server is gone (or this one restarted): carry on from its steps
                resumed = Guard.from_journal(self.journal, turn_id, tools, unattended=unattended,
                                             config=self.config, **options)  # journaled by the guard itself now
                resumed.start(resumed=True, by="a restarted guard server")
                return resumed
        return Guard(tools, unattended=unattended, task=task, turn_id=turn_id, config=self.config, **options)

    def _stretch_of(self, agent: Agent, session_id: str) -> int:
        """The session's stretch to carry on: its newest journaled turn when it is still running,
        else the next one (1 for a session the journal has never seen)."""
        if self.journal is None:
            return 1
        base = turn_id_of(agent, session_id)
        try:
            self.journal.turn(base)
        except JournalError:
            return 1  # a session the journal has never seen: no need to read every turn
        newest = 0
        running = False
        for turn in self.journal.turns():
            if turn.turn_id == base or turn.turn_id.startswith(base + "-"):
                tail = turn.turn_id[len(base):].lstrip("-")
                number = int(tail) if tail.isdigit() else 1
                if number > newest:
                    newest, running = number, not turn.status.ended
        if newest == 0:
            return 1
        return newest if running else newest + 1

    def _session(self, hooks: AgentHooks, event: HookEvent, env: Mapping[str, str], unattended_flag: str | None
                 ) -> _Session:
        key = (hooks.agent, event.session_id)
        with self._lock:
            found = self._sessions.get(key)
        if found is not None and not (found.ended and event.kind is not HookKind.STOP and not found.guard.latched):
            return found
        hint = unattended_flag or event.unattended_hint
        stretch = found.stretch + 1 if found is not None else self._stretch_of(hooks.agent, event.session_id)
        guard = self._new_guard(hooks, event, env, stretch, hint is not None)
        made = _Session(hooks.agent, event.session_id, hooks, guard, stretch, hint is not None, hint)
        with self._lock:
            self._sessions.pop(key, None)
            self._sessions[key] = made  # the newest last
            ended = [k for k, s in self._sessions.items() if s.ended and not s.asking]
            for old in ended[:max(0, len(self._sessions) - MAX_SESSIONS)]:
                del self._sessions[old]  # its turn is in the journal; a later event starts the next stretch
        return made

    def find(self, session_id: str) -> _Session | None:
        """The live session with ``session_id`` (any agent; the newest when several agents share it),
        or one whose turn id is ``session_id``."""
        with self._lock:
            live = list(self._sessions.values())
        for s in reversed(live):
            if session_id in (s.session_id, s.guard.turn_id):
                return s
        return None

    # -- one hook ------------------------------------------------------------------------------

    def handle(self, hooks: AgentHooks, event: HookEvent, env: Mapping[str, str], *,
               unattended_flag: str | None = None) -> HookOutcome:
        """Run one hook event through its session's guard and render the agent's reply.

        Args:
            hooks: the agent's mapping.
            event: the event, parsed.
            env: the hook process's environment (the session's tools and probes run with it).
            unattended_flag: the hook client's ``--unattended``, named, when it was given.
        """
        session = self._session(hooks, event, env, unattended_flag)
        with session.lock:
            if event.kind is HookKind.PRE_TOOL:
                session.calls += 1
            reply, escalation = self._decide(session, event)
            if escalation is not None and not session.unattended and self.ask_wait_s > 0:
                token = uuid.uuid4().hex
                session.asking[token] = event
                with session.answered:
                    session.answer = None
                self._publish(self._escalation_event(session, escalation))
                return HookOutcome(wait=token)
            if escalation is not None and session.unattended:
                self._end(session, TurnStatus.BLOCKED)
        stdout, code = hooks.render(event, reply)
        return HookOutcome(stdout, code)

    def _decide(self, session: _Session, event: HookEvent) -> tuple[HookReply, Escalation | None]:
        guard = session.guard
        kind = event.kind
        if kind is HookKind.SESSION_START:
            self._begin(session)
            note = self._known_blockers(guard)
            self._save(session)
            return HookReply(HookAction.CONTEXT if note else HookAction.ALLOW, context=note), None
        if kind is HookKind.STOP:
            return self._stop(session, event)
        call = event.call
        if call is None:
            return HookReply(), None
        if kind is HookKind.PRE_TOOL:
            self._begin(session)
            decision = guard.before(call)
            if decision.action is not Action.DISPATCH:
                self._save(session)
            if decision.action is Action.DISPATCH:
                return HookReply(), None
            if decision.escalation is not None and decision.action is Action.ESCALATE:
                return self._stop_reply(decision.content, decision.escalation), decision.escalation
            if guard.escalation is not None:  # latched: the session asked already, and must stop here
                return self._stop_reply(decision.content, guard.escalation), guard.escalation
            return HookReply(HookAction.DENY, reason=decision.content), None
        self._begin(session)
        decision = guard.after(call, event.output if event.output is not None else "")
        self._save(session)
        if decision.action is Action.ESCALATE and decision.escalation is not None:
            return self._stop_reply(decision.content, decision.escalation), decision.escalation
        added = self._added(decision)
        if decision.action is Action.RETRY:
            added = (f"{added}\n" if added else "") + guard.note(
                f"{GUIDANCE_PREFIX} The call failed in a way that waiting may fix: wait {decision.delay_s:g} s, "
                "then make the same call again.")
        return HookReply(HookAction.CONTEXT if added else HookAction.ALLOW, context=added or None), None

    @staticmethod
    def _added(decision: Decision) -> str:
        """What the guard added to the tool's own text (a lesson's note, its guidance): the
        model saw the tool's output already (as the coding agent showed it: a hook cannot quote
        a line of it that imitates unstuck's note, :func:`unstuck.decide.marks.neutralise`)."""
        content, step = decision.content, decision.step
        if step is None or not content:
            return ""
        own = neutralise(step.content)  # as the guard put it in the content
        return (content.replace(own, "", 1) if own and own in content else content if not own else "").strip()

    @staticmethod
    def _stop_reply(content: str, escalation: Escalation) -> HookReply:
        return HookReply(HookAction.STOP, reason=content or escalation.text, user_message=escalation.text)

    def _known_blockers(self, guard: Guard) -> str | None:
        """The lessons whose environment still matches, each probed now: one that still holds
        is shown (the session-start context), one that came back clean is closed."""
        keeper = guard.keeper
        if keeper is None or not guard.guarded:
            return None
        shown = []
        for lesson in keeper.known_blockers(guard.tools):
            probe = lesson.probe
            if probe is not None and guard.probe_allowed(probe):
                clean, _evidence = guard.run_probe(probe)
                if clean:
                    keeper.close(lesson, "its probe came back clean at a coding agent's session start")
                    continue
            shown.append(known_blocker_note(lesson))
        if not shown:
            return None
        return KNOWN_BLOCKERS_HEADING + "\n" + "\n".join(f"- {line}" for line in shown)

    def _stop(self, session: _Session, event: HookEvent) -> tuple[HookReply, Escalation | None]:
        guard = session.guard
        escalation = guard.escalation
        if escalation is None and guard.guarded and not event.stop_active:
            real = [b for b in guard.state.open_blockers.values() if not b.situation.is_refusal]
            if real:
                escalation = guard.escalate_open_blocker()
        if escalation is not None:
            self._end(session, TurnStatus.BLOCKED)
            return HookReply(HookAction.STOP, reason=escalation.text, user_message=escalation.text), None
        self._end(session, TurnStatus.DONE, answer=event.text)
        return HookReply(), None

    def _begin(self, session: _Session) -> None:
        """The session's turn in the journal (once), unless its guard journals for itself."""
        guard = session.guard
        guard.start()
        if self.journal is None or guard.journal is not None or session.journaled:
            return
        session.journaled = True
        state = guard.state
        self.journal.begin_turn(guard.turn_id, guard.task, unattended=state.unattended, guarded=guard.guarded,
                                config_json=json.dumps(state.config.to_dict()))

    def _save(self, session: _Session) -> None:
        """The steps not yet journaled (a riding commit)."""
        guard = session.guard
        if guard.journal is not None:
            guard.checkpoint()
            return
        if self.journal is None:
            return
        self._begin(session)
        steps = guard.steps
        if len(steps) > session.saved:
            self.journal.checkpoint(guard.turn_id, steps=steps[session.saved:], messages=(), first_seq=0)
            session.saved = len(steps)

    def _end(self, session: _Session, status: TurnStatus, *, answer: str = "") -> None:
        if session.ended:
            return
        session.ended = True
        guard = session.guard
        self._begin(session)
        self._save(session)
        final, _validations, error = guard.end(status, answer=answer)
        if self.journal is not None and guard.journal is None:
            self.journal.end_turn(guard.turn_id, final, answer=answer, error=error)

    # -- asking the user -----------------------------------------------------------------------

    def wait(self, token: str, timeout_s: float | None = None) -> HookOutcome:
        """Wait for the answer to the question the hook with ``token`` asked (at most
        ``timeout_s``, :attr:`ask_wait_s` by default), then the agent's reply: "done" and a
        clean probe lets the call run (pre-tool) or tells the model to go on; "skip" refuses
        calls on the subject; "stop", or no answer in time, stops the session.

        Raises:
            KeyError: an unknown token (the question was answered already, or never asked).
        """
        with self._lock:
            session = next((s for s in self._sessions.values() if token in s.asking), None)
        if session is None:
            raise KeyError(token)
        deadline = time.monotonic() + (self.ask_wait_s if timeout_s is None else timeout_s)
        with session.answered:
            while session.answer is None and session.guard.escalation is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                session.answered.wait(left)
            said = session.answer
        with session.lock:
            event = session.asking.pop(token)
            reply = self._after_answer(session, event, said)
            if reply.action is HookAction.STOP:
                self._end(session, TurnStatus.BLOCKED)
        stdout, code = session.hooks.render(event, reply)
        return HookOutcome(stdout, code)

    def _after_answer(self, session: _Session, event: HookEvent, said: Answer | None) -> HookReply:
        guard = session.guard
        escalation = guard.escalation
        if escalation is not None or said in (None, Answer.STOP):
            shown = escalation or session.last_question
            text = shown.text if shown is not None else "The session stopped to ask the user."
            return HookReply(HookAction.STOP, reason=text, user_message=text)
        note = session.note
        if event.kind is HookKind.PRE_TOOL and said is Answer.DONE and event.call is not None:
            again = guard.before(event.call)  # the same call: the blocker it met is closed now
            if again.action is Action.DISPATCH:
                return HookReply(HookAction.ALLOW, context=note or None)
            return HookReply(HookAction.DENY, reason=again.content)
        if event.kind is HookKind.PRE_TOOL:
            return HookReply(HookAction.DENY, reason=note or "Skipped by the user.")
        return HookReply(HookAction.CONTEXT, context=note or None)

    def answer(self, session_id: str, answer: Answer) -> dict[str, Any]:
        """The user's answer to ``session_id``'s question (:meth:`unstuck.Guard.answer`: "done"
        runs the blocker's probe). Returns ``{"session", "answer", "still_blocked", "note"}``.

        Raises:
            KeyError: no live session has that id.
            ValueError: the session has no open question.
        """
        session = self.find(session_id)
        if session is None:
            raise KeyError(session_id)
        guard = session.guard
        with session.lock:
            if guard.escalation is None:
                raise ValueError(f"session {session_id} has no open question")
            session.last_question = guard.escalation
            decision = guard.answer(answer)
            still = guard.escalation is not None and answer is not Answer.STOP
            session.note = "" if still or answer is Answer.STOP else decision.content
            if not session.ended:
                self._save(session)
        with session.answered:
            session.answer = None if still else answer
            session.answered.notify_all()
        shown = {"event": "answered", "agent": session.agent.value, "session": session.session_id,
                 "answer": answer.name.lower(), "still_blocked": still, "note": decision.content}
        self._publish(shown)
        return {"session": session.session_id, "turn": guard.turn_id, "answer": answer.name.lower(),
                "still_blocked": still, "note": decision.content}

    def close(self) -> None:
        """Wake every hook still waiting for an answer (they stop their sessions)."""
        with self._lock:
            live = list(self._sessions.values())
        for session in live:
            with session.answered:
                session.answered.notify_all()

    def __iter__(self) -> Iterator[tuple[Agent, str]]:
        with self._lock:
            return iter(list(self._sessions))


def event_json(item: Mapping[str, Any]) -> str:
    """One stream event as a server-sent event's lines (``event:`` and ``data:``)."""
    return f"event: {item.get('event', 'message')}\ndata: {json.dumps(dict(item), ensure_ascii=False)}\n\n"

