"""The Workflow picture (spec §Workflow status: child Jobs aggregated along the DAG dependencies):
layers by longest path, boxes that never overlap, arrows that never cross a box, cycles refused."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.dag import (
    BOX_HEIGHT,
    BOX_WIDTH,
    Box,
    DagLayout,
    DagNode,
    layers,
    layout,
)
from jobs.status.lifecycle import CycleError


def nodes(*ids: str) -> list[DagNode]:
    return [DagNode(id=i, label=f"job-{i}", phase="Pending") for i in ids]


def box(result: DagLayout, node_id: str) -> Box:
    return next(b for b in result.boxes if b.id == node_id)


def overlap(a: Box, b: Box) -> bool:
    return (
        a.x < b.x + b.width
        and b.x < a.x + a.width
        and a.y < b.y + b.height
        and b.y < a.y + a.height
    )


def path_points(path: str, steps: int = 24) -> list[tuple[float, float]]:
    """Points along an SVG path made of M, L and C commands (the only ones the layout emits)."""
    points: list[tuple[float, float]] = []
    current = (0.0, 0.0)
    for command, args in re.findall(r"([MLC])([^MLC]*)", path):
        numbers = [float(n) for n in args.split()]
        if command in "ML":
            end = (numbers[0], numbers[1])
            points += (
                [_lerp(current, end, t / steps) for t in range(steps + 1)]
                if command == "L"
                else [end]
            )
            current = end
        else:
            c1, c2, end = (
                (numbers[0], numbers[1]),
                (numbers[2], numbers[3]),
                (numbers[4], numbers[5]),
            )
            points += [_bezier(current, c1, c2, end, t / steps) for t in range(steps + 1)]
            current = end
    return points


def _lerp(a: tuple[float, float], b: tuple[float, float], t: float) -> tuple[float, float]:
    return (a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t)


def _bezier(p0, p1, p2, p3, t):  # type: ignore[no-untyped-def]
    u = 1 - t
    return tuple(
        u**3 * a + 3 * u * u * t * b + 3 * u * t * t * c + t**3 * d
        for a, b, c, d in zip(p0, p1, p2, p3, strict=True)
    )


def inside(point: tuple[float, float], b: Box) -> bool:
    x, y = point
    return b.x < x < b.x + b.width and b.y < y < b.y + b.height


def test_it_puts_a_job_one_layer_right_of_its_deepest_upstream() -> None:
    """Layer = longest path from a root: with a -> c and a -> b -> c, c sits in layer 2."""
    assert layers(["a", "b", "c"], [("a", "c"), ("a", "b"), ("b", "c")]) == {"a": 0, "b": 1, "c": 2}


def test_it_puts_every_root_in_the_first_column() -> None:
    result = layout(nodes("a", "b", "c"), [("a", "c")])
    assert {b.id: b.layer for b in result.boxes} == {"a": 0, "b": 0, "c": 1}
    assert box(result, "a").x == box(result, "b").x < box(result, "c").x


def test_it_carries_the_label_and_phase_of_every_job() -> None:
    result = layout(
        [DagNode("1", "prepare", "Succeeded"), DagNode("2", "train", "Running")], [("1", "2")]
    )
    assert [(b.label, b.phase) for b in result.boxes] == [
        ("prepare", "Succeeded"),
        ("train", "Running"),
    ]


def test_it_draws_one_arrow_per_edge_from_the_right_edge_to_the_left_edge() -> None:
    result = layout(nodes("a", "b"), [("a", "b")])
    (arrow,) = result.arrows
    a, b = box(result, "a"), box(result, "b")
    assert (arrow.upstream, arrow.downstream) == ("a", "b")
    assert arrow.path.startswith(f"M{a.x + a.width} {a.y + a.height // 2} ")
    assert arrow.path.endswith(f" {b.x} {b.y + b.height // 2}")


def test_it_sizes_the_picture_to_hold_every_box() -> None:
    result = layout(nodes("a", "b", "c", "d"), [("a", "b"), ("a", "c"), ("a", "d")])
    assert all(
        b.x + b.width < result.width and b.y + b.height < result.height for b in result.boxes
    )
    assert result.width == 2 * 12 + 2 * BOX_WIDTH + 64


def test_it_refuses_a_cycle() -> None:
    with pytest.raises(CycleError, match="cycle"):
        layout(nodes("a", "b", "c"), [("a", "b"), ("b", "c"), ("c", "a")])


def test_it_refuses_an_edge_to_an_unknown_job() -> None:
    with pytest.raises(ValueError, match="unknown job"):
        layout(nodes("a"), [("a", "zz")])


def test_it_lays_out_an_empty_workflow_as_an_empty_picture() -> None:
    result = layout([], [])
    assert (result.boxes, result.arrows) == ((), ())
    assert result.height == 2 * 12


def test_it_is_stable_for_the_same_input_in_any_order() -> None:
    edges = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]
    assert layout(nodes("a", "b", "c", "d"), edges) == layout(
        nodes("d", "c", "b", "a"), edges[::-1]
    )


def test_it_routes_an_arrow_that_skips_a_layer_around_the_box_in_between() -> None:
    """a -> b -> c and a -> c: the a -> c arrow crosses b's column without touching b."""
    result = layout(nodes("a", "b", "c"), [("a", "b"), ("b", "c"), ("a", "c")])
    skip = next(
        arrow for arrow in result.arrows if (arrow.upstream, arrow.downstream) == ("a", "c")
    )
    assert " L" in skip.path
    assert not any(inside(point, box(result, "b")) for point in path_points(skip.path))


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[DagNode], list[tuple[str, str]]]:
    count = draw(st.integers(min_value=1, max_value=12))
    ids = [f"j{i:02d}" for i in range(count)]
    pairs = [(ids[i], ids[j]) for i in range(count) for j in range(i + 1, count)]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=20)) if pairs else []
    return nodes(*draw(st.permutations(ids))), edges


@settings(max_examples=150, deadline=None)
@given(dags())
def test_it_never_overlaps_boxes_and_never_draws_an_arrow_through_one(
    dag: tuple[list[DagNode], list[tuple[str, str]]],
) -> None:
    graph, edges = dag
    result = layout(graph, edges)
    assert len(result.boxes) == len(graph)
    for i, a in enumerate(result.boxes):
        assert not any(overlap(a, b) for b in result.boxes[i + 1 :])
        assert (a.width, a.height) == (BOX_WIDTH, BOX_HEIGHT)
    for arrow in result.arrows:
        assert box(result, arrow.upstream).layer < box(result, arrow.downstream).layer
        for point in path_points(arrow.path):
            assert not any(inside(point, b) for b in result.boxes)
            assert 0 <= point[0] <= result.width and 0 <= point[1] <= result.height
