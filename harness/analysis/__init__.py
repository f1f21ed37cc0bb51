"""From raw samples and scraped series to figures: presets, per-phase figures, the report model."""
