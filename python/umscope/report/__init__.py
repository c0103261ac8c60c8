"""Self-contained HTML reports: inline SVG plots, no scripts, no external URLs."""
