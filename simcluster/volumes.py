"""Files a simulated process keeps, and how long they last: as long as the claim on a
PersistentVolumeClaim's volume (a re-created pod finds them), as long as the pod on any other
volume (an emptyDir survives a container restart), and as long as the container instance
elsewhere (a restarted container starts again from its image's filesystem, as a real one does).

Only what simulated processes write is kept (the driver's done marker), never the image's files.
A container-only file is not stored at all: no later instance can read it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
BoundVolume = Callable[[str, str], str | None]  # (namespace, claim) -> its volume's name


@dataclass(frozen=True)
class Mount:
    path: str
    volume: str  # a claim's volume name (pvc-<uid>), or "<pod uid>/<volume name>"
    sub_path: str = ""
    read_only: bool = False


def mounts_of(pod: Obj, container: Obj, bound_volume: BoundVolume) -> list[Mount]:
    """The container's mounts, each naming the volume that lives as long as its files."""
    meta = pod["metadata"]
    sources = {volume["name"]: volume for volume in pod["spec"].get("volumes") or ()}
    mounts = []
    for mount in container.get("volumeMounts") or ():
        claim = sources.get(mount["name"], {}).get("persistentVolumeClaim") or {}
        volume = claim.get("claimName") and bound_volume(meta["namespace"], claim["claimName"])
        mounts.append(
            Mount(
                posixpath.normpath(mount["mountPath"]),
                volume or f"{meta['uid']}/{mount['name']}",
                mount.get("subPath", ""),
                bool(mount.get("readOnly") or claim.get("readOnly")),
            )
        )
    return mounts


def locate(mounts: list[Mount], path: str) -> tuple[Mount, str] | None:
    """The mount `path` lies under (the deepest one: it hides those above it) and the path within
    its volume; None for the container's own filesystem."""
    path = posixpath.normpath(path)
    under = [m for m in mounts if path == m.path or path.startswith(m.path.rstrip("/") + "/")]
    if not under:
        return None
    mount = max(under, key=lambda m: len(m.path))
    inside = posixpath.relpath(path, mount.path)
    return mount, posixpath.normpath(posixpath.join(mount.sub_path, inside))


class Files:
    """Every kept file, by (volume, path within it)."""

    def __init__(self) -> None:
        self._files: dict[tuple[str, str], str] = {}

    def read(self, mounts: list[Mount], path: str) -> str | None:
        found = locate(mounts, path)
        return self._files.get((found[0].volume, found[1])) if found else None

    def write(self, mounts: list[Mount], path: str, text: str) -> str:
        """Writes the file atomically, as the driver does (a temporary file renamed over it);
        the error a process would get, or ""."""
        found = locate(mounts, path)
        if found is None:
            return ""  # the container's own filesystem: gone with this instance
        mount, inside = found
        if mount.read_only:
            return f"[Errno 30] Read-only file system: '{path}.tmp'"
        self._files[(mount.volume, inside)] = text
        return ""

    def forget_pod(self, uid: str) -> None:
        """A pod's own volumes go with it."""
        for key in [key for key in self._files if key[0].startswith(f"{uid}/")]:
            del self._files[key]
