"""labbot.bot.console: ``labbot console`` (``repl``) and the local Slack Web API emulator it points the real
slack_sdk at (``emulator``, with Slack's semantics in ``methods``, ``workspace``, ``blocks`` and ``model``)."""
