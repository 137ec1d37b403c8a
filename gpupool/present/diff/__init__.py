"""`gpupool diff` output, one module per format: text.py (terminals), markdown.py (the pull-request comment,
fitted to GitHub's limit by budget.py) and json_doc.py (docs/reference/diff-json.md).

What text and markdown both say is worded once: verdict.py (the verdict, summary line and alerts),
tenants.py, nodes.py (MIG re-layouts, pools), configs.py (device plugin, config entries, objects),
headroom.py and queues.py (Kueue). Every function takes the typed result, gpupool.analysis.diff.SpecDiff.
"""

from __future__ import annotations

from gpupool.present.diff.budget import GITHUB_COMMENT_LIMIT, comment_length
from gpupool.present.diff.headroom import mermaid_headroom
from gpupool.present.diff.json_doc import diagnostic_json, format_json
from gpupool.present.diff.markdown import Heading, format_markdown
from gpupool.present.diff.queues import queue_rows
from gpupool.present.diff.tenants import tenant_rows
from gpupool.present.diff.text import format_text
from gpupool.present.diff.verdict import ALERT_TITLE, alert_lines, summary_line, verdict, verdict_class

FORMATTERS = {"text": format_text, "markdown": format_markdown, "json": format_json}

# The names tests/test_diff_budget.py reaches through this package; they were private to the one module.
_verdict = verdict
_ALERT_TITLE = ALERT_TITLE
_tenant_rows = tenant_rows

__all__ = [
    "FORMATTERS",
    "GITHUB_COMMENT_LIMIT",
    "Heading",
    "alert_lines",
    "comment_length",
    "diagnostic_json",
    "format_json",
    "format_markdown",
    "format_text",
    "mermaid_headroom",
    "queue_rows",
    "summary_line",
    "verdict_class",
]
