"""People's feedback on what labbot posts, and the A/B test of the agents' models it judges: one concept, one package.

``ab``: the test itself (``[agents.ab]``): which model a new agent thread gets, sticky per thread (the fleet asks it
when a session starts). ``store``: votes (Slack's feedback buttons on agents' answers, 👍/👎 reactions on answers, run
cards and eval results), one row per message and voter, comments, and the per-arm numbers of the test. ``report``:
the A/B report — each arm's 👍 rate with its Wilson interval, the difference with Newcombe's, whether it is
significant yet and roughly how many more votes it needs — and the document every front door shows of it.
Below the front doors: Slack, the CLI and ``/api/v1`` only show what this package decides.
"""
