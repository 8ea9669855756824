"""What ``/lab`` subcommands and the buttons do, once acked: one module per concept (``runs``, ``pages``, ``evals``,
``artifacts``, ``feedback``, ``compare``, ``agents``, ``help``), each handler a plain async function taking the frozen
:class:`SlackDeps`, the parsed command and the :class:`Asker`; ``registry.HANDLERS`` names each subcommand's handler
and ``registry.dispatch`` runs it. Answers are ephemeral to whoever asked (or in the run's thread, for what everyone
should see)."""

from labbot.bot.slack.handlers.common import Asker, Handler, SlackDeps
from labbot.bot.slack.handlers.registry import HANDLERS, dispatch

__all__ = ["HANDLERS", "Asker", "Handler", "SlackDeps", "dispatch"]
