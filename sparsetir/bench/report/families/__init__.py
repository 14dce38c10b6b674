"""Each experiment family's tables and figures: one module per family (``Family.report_module()``), named as
the family, with ``workflow_tables(records, outputs, settings)`` and ``workflow_figures(csv, outputs)``
(``workflows/scripts/family_report.py`` calls them)."""
