"""The terminal around every command: an ASCII fallback when stdout cannot encode, and colour on terminals.

ASCII fallback: output keeps its Unicode (→, ×, ⚠ ...) where the stream can encode it; where it cannot
(`PYTHONIOENCODING=ascii`, LANG=C without UTF-8, a Latin-1 pipe), an encoding error handler writes the ASCII
spelling instead of crashing with UnicodeEncodeError: `→` becomes `->`, `×` `x`, `⚠` `!`; anything without a
spelling becomes `?`.

Colour: `--color auto` (the default) colours only when the stream is a terminal and NO_COLOR is unset or
empty (no-color.org); `always` and `never` override both. Only the severity words of diagnostic lines and
`error:` prefixes are coloured, so piping output never changes its text.
"""

from __future__ import annotations

import codecs
import os
import re
import sys

ASCII = {
    "→": "->",
    "←": "<-",
    "×": "x",
    "⚠": "!",
    "✓": "ok",
    "✗": "x",
    "✂": "8<",
    "…": "...",
    "·": "-",
    "—": "-",
    "–": "-",
    "−": "-",
    "≤": "<=",
    "≥": ">=",
    "≈": "~",
    "“": '"',
    "”": '"',
    "‘": "'",
    "’": "'",
    "\u00a0": " ",
}
ERRORS = "gpupool-ascii"


def _fallback(exc: UnicodeError):
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(ASCII.get(ch, "?") for ch in exc.object[exc.start : exc.end]), exc.end


codecs.register_error(ERRORS, _fallback)

_COLORS = {"error": "31", "warning": "33", "ok": "32"}  # red, yellow, green
_SEVERITY = re.compile(r"^(?P<head>(?:\S.*?:\d+:\d+: )|)(?P<sev>error|warning)(?P<tail>: )")
_mode = {"color": "auto"}


def setup(color: str = "auto") -> None:
    """Install the fallback on stdout and stderr (and remember the colour choice)."""
    _mode["color"] = color
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors=ERRORS)
            except (ValueError, OSError):  # a closed or detached stream: leave it alone
                pass


def use_color(stream) -> bool:
    mode = _mode["color"]
    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"
    except ValueError:
        return False


def paint(text: str, role: str, stream=None) -> str:
    stream = sys.stderr if stream is None else stream
    code = _COLORS.get(role)
    return f"\033[{code}m{text}\033[0m" if code and use_color(stream) else text


def severity(line: str, stream=None) -> str:
    """Colour the severity word of `FILE:LINE:COL: error: ...` and `error: ...` lines."""
    stream = sys.stderr if stream is None else stream
    if not use_color(stream):
        return line
    m = _SEVERITY.match(line)
    if not m:
        return line
    return m["head"] + paint(m["sev"], m["sev"], stream) + m["tail"] + line[m.end() :]


class _Colorizer:
    """A stderr that colours the severity word at the start of each line it is given (terminals only)."""

    def __init__(self, stream):
        self._stream = stream
        self._line_start = True

    def write(self, text: str) -> int:
        if self._line_start and text:
            lines = text.split("\n")
            text = "\n".join([severity(lines[0], self._stream)] + [severity(x, self._stream) for x in lines[1:]])
        elif "\n" in text:
            head, _, rest = text.partition("\n")
            text = head + "\n" + "\n".join(severity(x, self._stream) for x in rest.split("\n"))
        self._line_start = text.endswith("\n")
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def colour_stderr() -> None:
    """Wrap sys.stderr so every command's diagnostics are coloured on a terminal (and only there)."""
    if use_color(sys.stderr) and not isinstance(sys.stderr, _Colorizer):
        sys.stderr = _Colorizer(sys.stderr)
