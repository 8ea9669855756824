"""People's feedback on what labbot posts, and the A/B report it feeds.

``store``: votes (Slack's feedback buttons on agents' answers, 👍/👎 reactions on answers, run cards and eval
results), one row per message and voter, comments, and the per-arm numbers of an A/B test of agents' models.
``ab_report``: the report, pure — each arm's 👍 rate with its Wilson interval, the difference with Newcombe's, and
whether it is significant yet and roughly how many more votes it needs.
``ab_document``: the report of the configured test (or what to configure), as every front door shows it.
"""
