"""API errors as `Status` objects with the codes, reasons and messages kube-apiserver uses."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


class ApiError(Exception):
    """An error answer: raise anywhere under a request and the server writes the Status body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Obj | None = None,
        *,
        headers: dict[str, str] | None = None,
        metadata: Obj | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.metadata = metadata or {}

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": self.metadata,
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(name: str, group: str, kind: str) -> Obj:
    details: Obj = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    return details


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    message = f'{_qualified(plural, group)} "{name}" not found'
    return ApiError(404, "NotFound", message, _details(name, group, plural))


def already_exists(plural: str, group: str, name: str) -> ApiError:
    message = f'{_qualified(plural, group)} "{name}" already exists'
    return ApiError(409, "AlreadyExists", message, _details(name, group, plural))


def conflict(plural: str, group: str, name: str, why: str | None = None) -> ApiError:
    why = why or MODIFIED
    message = f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}'
    return ApiError(409, "Conflict", message, _details(name, group, plural))


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 with one cause per (field, message); the message lists them as kube-apiserver does."""
    texts = [f"{field}: {text}" for field, text in causes]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified = f"{kind}.{group}" if group else kind
    details = _details(name, group, kind)
    details["causes"] = [
        {"reason": _cause_reason(text), "message": text, "field": field} for field, text in causes
    ]
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {joined}', details)


def _cause_reason(text: str) -> str:
    for prefix, reason in (
        ("Required value", "FieldValueRequired"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Forbidden", "FieldValueForbidden"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Too long", "FieldValueTooLong"),
    ):
        if text.startswith(prefix):
            return reason
    return "FieldValueInvalid"


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(message: str, details: Obj | None = None) -> ApiError:
    return ApiError(403, "Forbidden", message, details)


def method_not_allowed() -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        {},
    )


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def unsupported_media_type(content_type: str) -> ApiError:
    message = (
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json-patch+json, application/merge-patch+json, "
        f"application/strategic-merge-patch+json (got {content_type!r})"
    )
    return ApiError(415, "UnsupportedMediaType", message)


def expired(inconsistent_continue: str) -> ApiError:
    """410 for a continue token older than the last compaction, offering the inconsistent token."""
    message = (
        "The provided continue parameter is too old to display a consistent list result. "
        "You can start a new list without the continue parameter, or use the continue token "
        "in this response to retrieve the remainder of the results. Continuing with the "
        "provided token results in an inconsistent list - objects that were created, modified, "
        "or deleted between the time the first chunk was returned and now may show up in the list."
    )
    return ApiError(410, "Expired", message, metadata={"continue": inconsistent_continue})


def injected(code: int) -> ApiError:
    """The Status a fault injection answers with, shaped like the real server's for that code."""
    if code == 429:
        return ApiError(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
            {"retryAfterSeconds": 1},
            headers={"Retry-After": "1"},
        )
    if code == 503:
        return ApiError(
            503, "ServiceUnavailable", "the server is currently unable to handle the request"
        )
    if code == 504:
        return ApiError(
            504, "Timeout", "the server was unable to return a response in the time allotted"
        )
    return ApiError(
        code,
        "InternalError",
        "Internal error occurred: injected fault",
        {"causes": [{"message": "injected fault"}]},
    )
