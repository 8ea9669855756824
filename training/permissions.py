"""Who may act on, or approve an action on, a resource: the one rule behind ``/lab stop`` and ``/lab restart``, the
run card's buttons and the agents' approval gate (``labbot.agents.fleet.approvals``), so that asking an agent is
never a way round what the commands refuse.

The rule follows the resource the action acts on, not who asked nor where:

* stopping or restarting a run (``stop`` / ``restart``, the tools ``stop_run`` / ``restart_run``), or filing its
  page as an incident: that run's owner, from the run id in the arguments; no run, or one that cannot be found,
  leaves admins only;
* stopping, pausing or resuming an experiment (``stop_experiment`` and the like): that experiment's owner, from the
  experiment id in the arguments (none found: admins only);
* starting a research question's plan (``start_research``: the approval that releases it) or closing the question:
  that question's owner, who asked it, from the ``research_id`` in the arguments (none found: admins only);
* launching on someone else's behalf (an ``owner`` argument naming another person, a run or an experiment): that
  person;
* anything else (what is the asker's own): the person who asked, and in a run's thread that run's owner.

Admins (``[roles] admins``) may always. Pure functions: the caller says how to find a run's owner.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

RUN_ACTIONS = frozenset({"stop", "restart", "stop_run", "restart_run", "file_incident"})
"""Actions (command verbs, buttons and tool names, without the ``server__`` prefix) that act on the run in
``run_id`` (File incident: the page's run; a cluster page has none, so admins only)."""
EXPERIMENT_ACTIONS = frozenset({"stop_experiment", "pause_experiment", "resume_experiment", "stop_trial"})
"""Actions that act on the experiment in ``experiment_id``."""
RESEARCH_ACTIONS = frozenset({"start_research", "close_research"})
"""Actions that act on the research question in ``research_id``."""
LAUNCH_ACTIONS = frozenset({"launch", "launch_run", "sweep", "run_experiment"})
_SHARED_OWNERS = frozenset({"", "agent"})  # an owner that is nobody in particular: launching as it is the asker's


def action_name(action: str) -> str:
    """The action without its MCP server prefix: ``lab__stop_run`` -> ``stop_run``."""
    return action.rpartition("__")[2]


def approvers(
    action: str,
    arguments: Mapping[str, Any],
    *,
    asker: str,
    run_owner: Callable[[str], str | None] | None,
    thread_run: str | None = None,
    experiment_owner: Callable[[str], str | None] | None = None,
    research_owner: Callable[[str], str | None] | None = None,
) -> tuple[str, ...]:
    """Who besides admins may do, or approve, ``action`` with ``arguments`` asked by ``asker`` (in the thread of
    ``thread_run``, if any); ``run_owner`` maps a run id to its owner (None: no such run), ``experiment_owner`` an
    experiment id to its owner, ``research_owner`` a research question's id to who asked it. An empty answer means
    admins only."""
    name = action_name(action)
    owner_of = run_owner or (lambda _run_id: None)
    if name in RUN_ACTIONS:
        run_id = arguments.get("run_id")
        owner = owner_of(run_id) if isinstance(run_id, str) and run_id else None
        return (owner,) if owner else ()
    if name in EXPERIMENT_ACTIONS:
        exp_id = arguments.get("experiment_id")
        find = experiment_owner or (lambda _exp_id: None)
        owner = find(exp_id) if isinstance(exp_id, str) and exp_id else None
        return (owner,) if owner else ()
    if name in RESEARCH_ACTIONS:
        rid = arguments.get("research_id")
        asked_by = research_owner or (lambda _rid: None)
        owner = asked_by(rid) if isinstance(rid, str) and rid else None
        return (owner,) if owner else ()
    on_behalf = arguments.get("owner")
    if name in LAUNCH_ACTIONS and isinstance(on_behalf, str) and on_behalf not in _SHARED_OWNERS | {asker}:
        return (on_behalf,)
    people = [asker]
    if thread_run:
        owner = owner_of(thread_run)
        if owner and owner != asker:
            people.insert(0, owner)
    return tuple(people)


def may(user: str, allowed: Collection[str], admins: Collection[str]) -> bool:
    """Whether ``user`` is one of ``allowed`` (from :func:`approvers`) or an admin."""
    return user in allowed or user in admins


def who_may(allowed: Collection[str]) -> str:
    """``allowed`` in words, with the admins: ``<@U1> or an admin``; ``an admin`` when nobody else may."""
    names = [f"<@{u}>" if u.startswith(("U", "W")) else u for u in allowed]
    return " or ".join([*names, "an admin"])
