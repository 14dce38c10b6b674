"""What a reader sees: speedup intervals, one figure style, experiment summaries, the report,
run-to-run comparison and the end-of-run screen.

- ``intervals``: bootstrap intervals of median ratios over interleaved rounds; win / tie / loss
- ``style``: the seaborn style and the speedup axis every figure uses (PNG and SVG)
- ``summary``: ``results/<experiment>/summary.json``, written by every experiment's tables step
- ``document``: ``report.md`` and ``report.html`` (headline tables, figures, Pending, provenance)
- ``compare``: a fresh run beside a reference run, case by case (``make compare``)
- ``endrun``: the screen ``make reproduce`` ends with
"""
