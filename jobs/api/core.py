"""The API object every endpoint module registers on, its errors (always JSON with a `message`;
ninja's own validation dump never reaches a client) and the helpers every endpoint shares.

Request bodies are read as plain JSON and checked by `jobs.spec`, so the API reports the same
per-field messages as the web form, every error at once, as {"message", "errors": {path: text}}.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver
from ninja import NinjaAPI, P, PathEx
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.openapi.schema import REF_TEMPLATE, OpenAPISchema
from pydantic import BaseModel, ConfigDict

from console import errors
from jobs.access import cannot_create, cannot_operate, projects_for
from jobs.api import series_doc
from jobs.api.auth import BearerToken
from jobs.operations import ConfirmationMismatch, OperationRefused
from jobs.spec import (
    SPEC_MAX_BYTES,
    SPEC_MAX_NODES,
    JobSpec,
    SpecInvalid,
    WorkflowSpec,
    check_plain_data,
)
from jobs.workload.intake import SignalBatch

if TYPE_CHECKING:
    from ninja.operation import Operation

logger = logging.getLogger(__name__)

MAX_ID = 2**63 - 1


# --- documents the raw JSON request bodies in the OpenAPI schema ---------------------------


class CloneIn(BaseModel):
    """A new name, and changes deep-merged into the source Job's spec (tasks merge by role)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    overrides: dict[str, Any] | None = None


SIGNAL_TOKEN = {
    "type": "http",
    "scheme": "bearer",
    "description": "A Job's TRAINYARD_SIGNAL_TOKEN, given to its pods (docs/api.md, Signals).",
}


class TrainyardAPI(NinjaAPI):
    REQUEST_MODELS: tuple[type[BaseModel], ...] = (JobSpec, CloneIn, WorkflowSpec, SignalBatch)

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> OpenAPISchema:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        components = schema["components"]["schemas"]
        for model in self.REQUEST_MODELS:
            definition = model.model_json_schema(ref_template=REF_TEMPLATE)
            components.update(definition.pop("$defs", {}))
            components[model.__name__] = definition
        schema["components"].setdefault("securitySchemes", {})["SignalToken"] = SIGNAL_TOKEN
        schema["paths"][series_doc.PATH] = series_doc.operation()
        return schema

    def get_openapi_operation_id(self, operation: Operation) -> str:
        """An operationId is a contract (generated clients name their methods by it), and a move
        of code changes no behaviour. The Job API's operations keep the ids they were published
        with while it was one module (`jobs_api_list_jobs`, ninja's default then), whichever
        module of this package holds them now; the operations other apps add keep theirs, their
        function's name alone (`list_channels`)."""
        func = operation.view_func
        if func.__module__.startswith(f"{__package__}."):
            return f"{__package__}_{func.__name__}".replace(".", "_")
        return func.__name__

    def _get_urls(self) -> list[URLResolver | URLPattern]:
        """ninja answers a wrong method with a plain-text 405; ours is JSON like every error.
        The interactive docs are a page of the console, for logged-in users; the OpenAPI
        document itself stays public (docs/api.md). The catch-all is registered here, when the
        URLs are built, and its pattern put last, so it comes after every endpoint, whatever
        module or router registered it."""
        if UNKNOWN not in self.default_router.path_operations:
            methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
            operation = self.api_operation(methods, UNKNOWN, auth=None, include_in_schema=False)
            operation(unknown_endpoint)
        found = super()._get_urls()
        last = [p for p in found if isinstance(p, URLPattern) and "<path:rest>" in str(p.pattern)]
        urls = [p for p in found if p not in last] + last
        for pattern in urls:
            if isinstance(pattern, URLPattern):
                pattern.callback = _json_not_allowed(pattern.callback)
                if pattern.name == "openapi-view":
                    pattern.callback = login_required(pattern.callback)
        return urls


UNKNOWN = "/{path:rest}"


def unknown_endpoint(request: HttpRequest, rest: str) -> None:
    """Any path under /api/v1/ that no endpoint claims is a JSON 404 too."""
    raise Http404("No such API endpoint.")


def _json_not_allowed(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        if response.status_code != 405 or response["Content-Type"].startswith("application/json"):
            return response
        allowed = response["Allow"]
        response = error(request, 405, f"{request.method} is not allowed here; use {allowed}.")
        response["Allow"] = allowed
        return response

    return wrapped


def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    reference = {"$ref": REF_TEMPLATE.format(model=model.__name__)}
    return {
        "requestBody": {"required": True, "content": {"application/json": {"schema": reference}}}
    }


api = TrainyardAPI(
    title="Trainyard API",
    version="1",
    urls_namespace="api",
    auth=BearerToken(),
    description="Jobs, Workflows, clusters, nodes and add-ons. See docs/api.md.",
)


# --- errors: always JSON with a message ----------------------------------------------------


def error(request: HttpRequest, status: int, message: str, **extra: Any) -> HttpResponse:
    return api.create_response(request, {"message": message, **extra}, status=status)


@api.exception_handler(SpecInvalid)
def _spec_invalid(request: HttpRequest, exc: SpecInvalid) -> HttpResponse:
    return error(request, 422, exc.message, errors=exc.errors)


@api.exception_handler(ValidationError)
def _params_invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    """Query and path parameters. An id that cannot exist (not a number, out of range) is as
    unknown as one that does not: 404, like any other unknown id."""
    found: dict[str, str] = {}
    for problem in exc.errors:
        location, *path = problem["loc"]
        if location == "path":
            return error(request, 404, "Not found.")
        message = str(problem.get("ctx", {}).get("error") or problem["msg"])
        found.setdefault(".".join(str(part) for part in path) or str(location), message)
    return error(request, 422, "Invalid query parameters.", errors=found)


@api.exception_handler(ConfirmationMismatch)
def _confirmation(request: HttpRequest, exc: ConfirmationMismatch) -> HttpResponse:
    return error(request, 422, exc.message, errors={"confirm": exc.message})


@api.exception_handler(OperationRefused)
def _refused(request: HttpRequest, exc: OperationRefused) -> HttpResponse:
    return error(request, 409, exc.message)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = error(request, 401, "Send a valid API token: Authorization: Bearer <token>.")
    response["WWW-Authenticate"] = "Bearer"
    return response


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return error(request, exc.status_code, exc.message)


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return error(request, 404, str(exc) or "Not found.")


@api.exception_handler(PermissionDenied)
def _forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return error(request, 403, str(exc) or "You may not do this.")


@api.exception_handler(RequestDataTooBig)
def _too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return error(request, 413, "The request body is too large.")


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    if errors.database_unavailable(exc):
        logger.warning("API %s %s: the database is unavailable (%s)", request.method,
                       request.path, type(exc).__name__)  # fmt: skip
        message = errors.unavailable_message()
        response = error(request, 503, message, message_code=errors.MESSAGE_CODE)
        return errors.retry_later(response)
    logger.exception("API error on %s %s", request.method, request.path, exc_info=exc)
    return error(request, 500, "Internal error; it has been logged.")


# --- helpers every endpoint shares ---------------------------------------------------------


def user_of(request: HttpRequest) -> AbstractBaseUser:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def json_body(
    request: HttpRequest, max_bytes: int = SPEC_MAX_BYTES, max_nodes: int = SPEC_MAX_NODES
) -> dict[str, Any]:
    """The body as a JSON object whose every text is storable and whose size and nesting are
    bounded (`check_plain_data`): what any later rule, merge or query may safely read."""
    if len(request.body) > max_bytes:
        raise HttpError(413, f"The request body is larger than {max_bytes // 1024} KiB.")
    try:
        data = json.loads(request.body or b"null")
    except (ValueError, RecursionError):
        raise SpecInvalid({"body": "The request body is not valid JSON."}) from None
    if not isinstance(data, dict):
        raise SpecInvalid({"body": "The request body must be a JSON object."})
    check_plain_data(data, max_nodes=max_nodes)
    return data


def forbid_viewer(user: AbstractBaseUser, project: Any) -> None:
    """A reader who may not operate in the project asked to create in it: 403, as for every
    other write (a project they cannot see is the spec's 422, with no hint that it exists)."""
    visible, writable = projects_for(user), projects_for(user, write=True)
    if isinstance(project, str):
        named = visible.filter(name=project).first()
        if named is not None and not writable.filter(pk=named.pk).exists():
            raise PermissionDenied(cannot_operate(user, named))
    elif project is None and visible.exists() and not writable.exists():
        raise PermissionDenied(cannot_create(user))


def page_url(request: HttpRequest, offset: int, limit: int) -> str:
    query = request.GET.copy()
    query["offset"], query["limit"] = str(offset), str(limit)
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")


ObjectId = PathEx[int, P(ge=1, le=MAX_ID)]
