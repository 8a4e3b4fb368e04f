"""Tick labels that never overlap: measured on the drawn figure, rotated until they stand apart."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:   # matplotlib is imported when a chart is drawn (performance.py new_figure)
    from matplotlib.figure import Figure

ANGLES = (0, 30, 45, 60, 90)


def label_boxes(fig: Figure, labels) -> list:
    """The window extents (display pixels) of the non-empty labels, as drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

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


# where a point's label may go, in points from the point: right-below first, then around it, then further
OFFSETS = ((5, -11, "left"), (5, 4, "left"), (-5, 4, "right"), (-5, -11, "right"), (5, 14, "left"),
           (5, -22, "left"), (-5, 14, "right"), (-5, -22, "right"))


def place_point_labels(fig: Figure, ax, points: list[tuple[float, float, str]], fontsize: float = 7) -> int:
    """Label each point (x, y, text) of ``ax`` where its label overlaps no other label: the first free
    place of OFFSETS. A label whose text a placed label near it already says (the same N on three
    backends' points) is not repeated; one with no free place is left out. Returns how many were left out.
    Call it last: the axes' scales and limits must be final."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    placed: list[tuple[str, object]] = []
    left_out = 0
    for x, y, text in points:
        label = ax.annotate(text, (x, y), textcoords="offset points", xytext=OFFSETS[0][:2], fontsize=fontsize)
        for dx, dy, align in OFFSETS:
            label.xyann, _ = (dx, dy), label.set_horizontalalignment(align)
            box = label.get_window_extent(renderer)
            near = box.expanded(3.0, 3.0)
            if any(t == text and near.overlaps(b) for t, b in placed):   # said already, right there
                label.remove()
                break
            if not any(box.overlaps(b) for _, b in placed):
                placed.append((text, box))
                break
        else:
            label.remove()
            left_out += 1
    return left_out
