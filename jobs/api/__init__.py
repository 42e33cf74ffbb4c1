"""The JSON API under /api/v1/: bearer tokens, the same operations as the web console.

One module per resource registers its endpoints on `core.api`: `platform` (clusters, nodes,
add-ons), `jobs`, `workflows`, `pod_signals` (the signals a Job's pods post); `auth` checks a user's
token, `core` holds the API object, its errors and the helpers every endpoint shares, and
registers the catch-all JSON 404 when the URLs are built, after every endpoint (another app's
too, such as `notify.api`).
"""

from __future__ import annotations

from jobs.api import jobs, platform, pod_signals, workflows
from jobs.api.core import TrainyardAPI, api

__all__ = ["TrainyardAPI", "api", "jobs", "platform", "pod_signals", "workflows"]
