"""The picture of a Workflow's DAG: where each child Job's box goes and how the arrows run.

Pure: ids, labels, phases and edges in; boxes with coordinates and SVG path data out. Columns are
the layers of `jobs.status.lifecycle.topological_order` (a Job's layer is the longest path from a
root), so every arrow points rightwards. An arrow that skips layers passes through a reserved
lane in each column it crosses, and every curve stays inside the gap between two columns: arrows
never run through a box.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from jobs.status.lifecycle import topological_order

BOX_WIDTH = 196
BOX_HEIGHT = 54
LANE_HEIGHT = 10
COLUMN_GAP = 64
ROW_GAP = 18
MARGIN = 12

# A slot in a column is a Job id, or a lane (upstream, downstream, layer) for an arrow passing by.
Lane = tuple[str, str, int]
Slot = str | Lane


@dataclass(frozen=True)
class DagNode:
    id: str
    label: str
    phase: str


@dataclass(frozen=True)
class Box:
    id: str
    label: str
    phase: str
    layer: int
    x: int
    y: int
    width: int = BOX_WIDTH
    height: int = BOX_HEIGHT


@dataclass(frozen=True)
class Arrow:
    upstream: str
    downstream: str
    path: str


@dataclass(frozen=True)
class DagLayout:
    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]
    width: int
    height: int


def layers(ids: Iterable[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Each id's layer: 0 for a root, else one more than its deepest upstream.

    Raises `jobs.status.lifecycle.CycleError` when the edges form a cycle.
    """
    edges = list(edges)
    upstreams: dict[str, list[str]] = {}
    for upstream, downstream in edges:
        upstreams.setdefault(downstream, []).append(upstream)
    layer: dict[str, int] = {}
    for node in topological_order(ids, edges):
        layer[node] = max((layer[up] + 1 for up in upstreams.get(node, [])), default=0)
    return layer


def layout(nodes: Sequence[DagNode], edges: Iterable[tuple[str, str]]) -> DagLayout:
    """Boxes placed column by column, and the arrows (edges run upstream -> downstream)."""
    edges = sorted(set(edges))
    layer = layers([node.id for node in nodes], edges)
    columns = _order_columns(_columns(layer, edges), _predecessors(layer, edges))
    tops, height = _tops(columns)
    by_id = {node.id: node for node in nodes}
    boxes = tuple(
        Box(slot, by_id[slot].label, by_id[slot].phase, index, _column_x(index), tops[slot])
        for index, column in enumerate(columns)
        for slot in column
        if isinstance(slot, str)
    )
    arrows = tuple(Arrow(up, down, _path(up, down, layer, tops)) for up, down in edges)
    width = 2 * MARGIN + len(columns) * BOX_WIDTH + max(len(columns) - 1, 0) * COLUMN_GAP
    return DagLayout(boxes, arrows, width, height)


def _columns(layer: dict[str, int], edges: Sequence[tuple[str, str]]) -> list[list[Slot]]:
    """Slots per layer: Jobs in topological order, then the lanes of arrows skipping layers."""
    columns: list[list[Slot]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for node, index in layer.items():
        columns[index].append(node)
    for up, down in edges:
        for index in range(layer[up] + 1, layer[down]):
            columns[index].append((up, down, index))
    return columns


def _predecessors(
    layer: dict[str, int], edges: Sequence[tuple[str, str]]
) -> dict[Slot, list[Slot]]:
    """For each slot, the slots of the previous column that an arrow comes from."""
    previous: dict[Slot, list[Slot]] = {}
    for up, down in edges:
        chain: list[Slot] = [up, *((up, down, i) for i in range(layer[up] + 1, layer[down])), down]
        for before, after in pairwise(chain):
            previous.setdefault(after, []).append(before)
    return previous


def _order_columns(columns: list[list[Slot]], previous: dict[Slot, list[Slot]]) -> list[list[Slot]]:
    """One left-to-right barycentre sweep: a slot sits near the slots its arrows come from,
    which keeps crossings few; ties keep the topological order (so the picture is stable)."""
    ordered: list[list[Slot]] = []
    for column in columns:
        rank = {slot: row for row, slot in enumerate(ordered[-1])} if ordered else {}
        keys = {
            slot: _barycentre(row, previous.get(slot, []), rank) for row, slot in enumerate(column)
        }
        ordered.append(sorted(column, key=keys.__getitem__))
    return ordered


def _barycentre(row: int, froms: list[Slot], rank: dict[Slot, int]) -> tuple[float, int]:
    rows = [rank[slot] for slot in froms if slot in rank]
    return (sum(rows) / len(rows) if rows else float(row), row)


def _tops(columns: list[list[Slot]]) -> tuple[dict[Slot, int], int]:
    """The top y of every slot, each column centred vertically; and the picture's height."""
    heights = [_column_height(column) for column in columns]
    tallest = max(heights, default=0)
    tops: dict[Slot, int] = {}
    for column, height in zip(columns, heights, strict=True):
        y = MARGIN + (tallest - height) // 2
        for slot in column:
            tops[slot] = y
            y += _slot_height(slot) + ROW_GAP
    return tops, 2 * MARGIN + tallest


def _slot_height(slot: Slot) -> int:
    return BOX_HEIGHT if isinstance(slot, str) else LANE_HEIGHT


def _column_height(column: list[Slot]) -> int:
    return sum(_slot_height(slot) for slot in column) + ROW_GAP * max(len(column) - 1, 0)


def _column_x(index: int) -> int:
    return MARGIN + index * (BOX_WIDTH + COLUMN_GAP)


def _path(up: str, down: str, layer: dict[str, int], tops: dict[Slot, int]) -> str:
    """SVG path data from the right edge of `up` to the left edge of `down`, straight through
    the lanes reserved in the columns between them, curving only inside the gaps."""
    x, y = _column_x(layer[up]) + BOX_WIDTH, tops[up] + BOX_HEIGHT // 2
    parts = [f"M{x} {y}"]
    for index in range(layer[up] + 1, layer[down]):
        lane_y = tops[(up, down, index)] + LANE_HEIGHT // 2
        parts.append(_curve(x, y, _column_x(index), lane_y))
        x, y = _column_x(index) + BOX_WIDTH, lane_y
        parts.append(f"L{x} {y}")
    parts.append(_curve(x, y, _column_x(layer[down]), tops[down] + BOX_HEIGHT // 2))
    return " ".join(parts)


def _curve(x1: int, y1: int, x2: int, y2: int) -> str:
    """A cubic Bézier whose control points lie between x1 and x2 (so the curve does too)."""
    bend = (x2 - x1) // 2
    return f"C{x1 + bend} {y1} {x2 - bend} {y2} {x2} {y2}"
