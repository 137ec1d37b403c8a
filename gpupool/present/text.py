"""Small wording helpers shared by every command's output, and `safe`, the one terminal escaper."""

from __future__ import annotations

from gpupool.spec.diagnostics import printable

WARN = "⚠"  # printed as "!" where stdout cannot encode it (gpupool.cli.console)


def safe(text: object) -> str:
    """TEXT for a terminal or a log: control characters (C0 such as ESC, CR, backspace and newline; DEL; C1
    such as CSI), Unicode line separators and bidirectional overrides written as visible escapes (`\\x1b`,
    `\\n`, `\\u202e`), so that no escape sequence reaches the terminal, no carriage return overwrites a line
    and no newline forges one. Applied to every line a command prints that holds text from a spec (tenant
    files are untrusted input); gpupool.present.markdown escapes the same way for pull-request comments."""
    return printable(str(text))


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """'1 GPU', '2 GPUs', '1 node', '0 errors'; PLURAL_FORM for irregular nouns ('1 policy', '2 policies')."""
    if n == 1:
        return f"{n} {noun}"
    if plural_form is None:
        plural_form = (
            noun[:-1] + "ies"
            if noun.endswith("y") and noun[-2:-1] not in "aeiou"
            else noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")
        )
    return f"{n} {plural_form}"
