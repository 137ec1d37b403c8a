"""Small wording helpers shared by every command's output."""

from __future__ import annotations

WARN = "⚠"  # printed as "!" where stdout cannot encode it (gpupool.cli.console)


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
