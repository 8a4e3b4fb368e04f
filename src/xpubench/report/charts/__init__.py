"""The report's charts as PNG bytes (matplotlib, no pyplot state): performance (performance.py, with
the helpers every chart uses), generation, the roofline, training quality, time to target; tick labels
that never overlap (labels.py)."""
