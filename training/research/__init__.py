"""Research: a question taken to a checked answer by the researcher agent under one approval.

``plan`` checks a proposed plan (arms that are experiments, one budget, the failure actions it may take, where it
publishes), prices it and reduces it to the scope whose hash an approval releases, and compares an approved scope
with a changed one (pure); ``service`` is what the front doors call: open, propose, start (the approved action), act
within the plan, report (every number checked by the claim ledger, ``labbot.training.claims``), close.
"""
