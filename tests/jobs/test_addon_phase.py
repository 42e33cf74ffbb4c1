"""A registry add-on's phase, pure (jobs/status/addons.py; spec §Node and Addon status: Ready
means the desired version is reached; issue 36, Build 3)."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.choices import AddonPhase
from jobs.status.addons import AttemptFacts, Rollout, addon_phase

DONE = Rollout("Deployment", "agent", True, 2, 2, 3, 3, 3)
ROLLING = Rollout("Deployment", "agent", True, 2, 2, 3, 1, 2)
STALE = Rollout("Deployment", "agent", True, 3, 2, 3, 3, 3)  # the controller has not seen v3
STUCK = Rollout("Deployment", "agent", True, 2, 2, 3, 1, 2, deadline_exceeded=True)
LOST = Rollout("DaemonSet", "plugin", True, 1, 1, 4, 4, 3)
# The new pod exists (updated 1) but the old one still serves: not rolled out (kubectl).
OLD_LEFT = Rollout("Deployment", "agent", True, 2, 2, 1, 1, 1, total=2)


def attempt(**fields: Any) -> AttemptFacts:
    values: dict[str, Any] = {
        "kind": "upgrade", "from_version": "1", "to_version": "2", "running": False,
        "failed": False, "applied": True, "answer": "", "lease_expired": False,
    }  # fmt: skip
    return AttemptFacts(**(values | fields))


@pytest.mark.parametrize(
    ("applied", "desired", "last", "rollouts", "phase"),
    [
        ("", "1", None, [], AddonPhase.PENDING),
        ("", "1", attempt(kind="install", from_version="", running=True, applied=False), [],
         AddonPhase.INSTALLING),
        ("1", "1", attempt(kind="install", from_version="", running=True), [ROLLING],
         AddonPhase.INSTALLING),
        ("1", "1", attempt(kind="install", from_version=""), [DONE], AddonPhase.READY),
        ("2", "2", attempt(running=True), [ROLLING], AddonPhase.UPGRADING),
        ("2", "2", attempt(running=True), [STALE], AddonPhase.UPGRADING),
        ("2", "2", attempt(running=True), [STUCK], AddonPhase.FAILED),
        ("", "1", attempt(kind="install", from_version="", running=True, applied=False,
                          lease_expired=True), [], AddonPhase.FAILED),
        ("1", "2", attempt(failed=True, applied=False, answer="HTTP 422"), [DONE],
         AddonPhase.FAILED),
        ("2", "2", attempt(), [LOST], AddonPhase.READY),
        ("2", "2", attempt(running=True), [OLD_LEFT], AddonPhase.UPGRADING),
    ],
)  # fmt: skip
def test_it_derives_the_phase_from_what_was_applied_and_observed(
    applied: str, desired: str, last: AttemptFacts | None, rollouts: list[Rollout],
    phase: AddonPhase,
) -> None:  # fmt: skip
    assert addon_phase(applied, desired, last, rollouts)[0] == phase


def test_a_ready_addon_that_lost_availability_says_why() -> None:
    assert addon_phase("2", "2", attempt(), [LOST]) == (
        AddonPhase.READY, "availability lost: DaemonSet plugin: 3/4 available",
    )  # fmt: skip


def test_crash_looping_pods_fail_it() -> None:
    looping = Rollout("Deployment", "agent", True, 2, 2, 3, 3, 1, crash_looping=2)
    phase, reason = addon_phase("2", "2", attempt(running=True), [looping])
    assert phase == AddonPhase.FAILED and "2 pods crash-looping" in reason
