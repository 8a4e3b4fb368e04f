"""Tick labels that never overlap: measured on the drawn figure, rotated until they stand apart."""

from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

ANGLES = (0, 30, 45, 60, 90)


def label_boxes(fig: Figure, labels) -> list:
    """The window extents (display pixels) of the non-empty labels, as drawn."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    return [t.get_window_extent(renderer) for t in labels if t.get_visible() and t.get_text()]


def overlapping(fig: Figure, labels) -> list[tuple[int, int]]:
    """Pairs (i, j) of labels whose drawn boxes overlap."""
    boxes = label_boxes(fig, labels)
    return [(i, j) for i, a in enumerate(boxes) for j, b in enumerate(boxes[i + 1:], i + 1) if a.overlaps(b)]


def fit_x_labels(fig: Figure, ax) -> int:
    """Rotate the x tick labels of ``ax`` by the smallest angle of ANGLES at which no two overlap;
    returns the angle used."""
    for angle in ANGLES:
        for label in ax.get_xticklabels():
            label.set_rotation(angle)
            label.set_horizontalalignment("right" if angle else "center")
            label.set_rotation_mode("anchor" if angle else "default")
        if not overlapping(fig, ax.get_xticklabels()):
            return angle
    return ANGLES[-1]
