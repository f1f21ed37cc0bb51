"""From raw samples and scraped series to figures.

Presets and canonical series (``series``), figures per window and phase
(``figures``), comparisons and repetitions (``combine``), the typed shape of
``report.json`` (``model``) and how a figure reads as text (``format``).
"""
