"""labbot.common: the helpers every layer uses — the error tree, durations, human formatting, the retry policy.

The bottom of labbot: imports nothing from labbot (only ``labbot_client``, which is below everything).
"""
