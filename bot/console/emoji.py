"""Slack emoji shortcodes as the emoji a Slack client draws (``:white_check_mark:`` → ✅), for the console.

The table holds every shortcode labbot writes and the common ones people type; a shortcode it does not know stays
as typed, as Slack shows a custom emoji's name when the image is missing. Skin tones (``:+1::skin-tone-3:``) are
dropped: the terminal shows the plain emoji.
"""

from __future__ import annotations

import re

SHORTCODES: dict[str, str] = {
    "arrow_forward": "▶️",
    "arrows_counterclockwise": "🔄",
    "black_square_for_stop": "⏹️",
    "chart_with_upwards_trend": "📈",
    "chart_with_downwards_trend": "📉",
    "eyes": "👀",
    "grey_question": "❔",
    "hourglass": "⌛",
    "hourglass_flowing_sand": "⏳",
    "memo": "📝",
    "no_entry": "⛔",
    "raised_hand": "✋",
    "recycle": "♻️",
    "repeat": "🔁",
    "rocket": "🚀",
    "rotating_light": "🚨",
    "tada": "🎉",
    "ticket": "🎫",
    "warning": "⚠️",
    "wave": "👋",
    "white_check_mark": "✅",
    "x": "❌",
    "+1": "👍",
    "thumbsup": "👍",
    "-1": "👎",
    "thumbsdown": "👎",
    "fire": "🔥",
    "bug": "🐛",
    "bulb": "💡",
    "mag": "🔍",
    "robot_face": "🤖",
    "thinking_face": "🤔",
    "heavy_check_mark": "✔️",
    "zap": "⚡",
    "stopwatch": "⏱️",
    "clipboard": "📋",
    "test_tube": "🧪",
    "microscope": "🔬",
    "gear": "⚙️",
    "pager": "📟",
    "sparkles": "✨",
    "smile": "😄",
    "slightly_smiling_face": "🙂",
}
_SHORTCODE = re.compile(r":([a-z0-9_+\-]+):(?::skin-tone-[2-6]:)?")


def emojize(text: str) -> str:
    """``text`` with every known shortcode replaced by its emoji."""
    return _SHORTCODE.sub(lambda m: SHORTCODES.get(m.group(1), m.group(0)), text)
