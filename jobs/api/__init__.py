"""The JSON API under /api/v1/: bearer tokens, the same operations as the web console.

One module per resource registers its endpoints on `core.api`: `platform` (clusters, nodes,
add-ons), `jobs`, `workflows`, `intake` (the signals a Job's pods post); `auth` checks a user's
token, `core` holds the API object, its errors and the helpers every endpoint shares. The
catch-all below is registered after every endpoint module is imported, so it answers only paths
no module claims.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest

from jobs.api import intake, jobs, platform, workflows
from jobs.api.core import TrainyardAPI, api

__all__ = ["TrainyardAPI", "api", "intake", "jobs", "platform", "workflows"]


@api.api_operation(
    ["GET", "POST", "PUT", "PATCH", "DELETE"], "/{path:rest}", auth=None, include_in_schema=False
)
def unknown_endpoint(request: HttpRequest, rest: str) -> None:
    """Registered last: any other path under /api/v1/ is a JSON 404 too."""
    raise Http404("No such API endpoint.")
