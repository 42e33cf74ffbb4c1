"""YAML from people (a job spec, a kubeconfig): read at a bounded cost, refused in plain words.

PyYAML expands aliases before anything can look at the result: 432 bytes of chained `&a`/`*a`
become a gigabyte, and its composer recurses once per nesting level (900 `[` is a
RecursionError). So the text is composed here node by node over libyaml's events: an anchor, an
alias or a merge key (`<<`) is refused where it appears, and so is nesting deeper than MAX_DEPTH
or more nodes than the caller allows; only then are values built. Any spec under the size cap is
judged in a few milliseconds.

Errors say the line, the column and what was expected, in words a person can act on and in the
reader's language; PyYAML's own text ("did not find expected key") is never shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

from django.utils.functional import Promise
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from yaml import MarkedYAMLError, YAMLError
from yaml._yaml import CParser
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.error import Mark
from yaml.events import AliasEvent, CollectionStartEvent, Event, NodeEvent, ScalarEvent
from yaml.nodes import Node
from yaml.reader import ReaderError
from yaml.resolver import Resolver

# A job spec is five levels deep (spec > tasks > task > resources > value); a kubeconfig six.
MAX_DEPTH = 20
# 20 Tasks with generous env, args and node selectors stay under a thousand nodes; composing
# costs about 5 µs a node, so the cap keeps a spec's worst case near 10 ms.
SPEC_MAX_NODES = 2000

# What PyYAML/libyaml says (a fragment of its problem) -> what we say.
_PROBLEMS: tuple[tuple[str, Promise], ...] = (
    (
        "mapping values are not allowed",
        _("a ': ' cannot start a value here; put quotes around text that contains ': '"),
    ),
    ("did not find expected key", _("expected 'key: value' at this indentation; check the spaces")),
    ("could not find expected ':'", _("expected ':' after the key")),
    ("did not find expected '-'", _("expected a list item ('- ...') at this indentation")),
    ("expected ',' or ']'", _("expected ',' or ']' to go on with or close the list")),
    ("expected ',' or '}'", _("expected ',' or '}' to go on with or close the mapping")),
    ("expected node content", _("expected a value")),
    ("tab character", _("a tab cannot indent YAML; use spaces")),
    ("cannot start any token", _("this character cannot start a value; put the value in quotes")),
    ("end of stream", _("the text ends inside quotes; close the quote")),
    ("escape", _("this backslash escape is not one YAML knows; write \\\\ for a backslash")),
    ("tag", _("tags (!!python/..., !custom) are not accepted; write plain values")),
    ("unhashable key", _("a key must be a single word or number, not a list or mapping")),
    ("another document", _("expected a single document; remove the '---' and what follows")),
    ("undefined alias", _("aliases (*name) are not accepted; write the value out")),
)
_REFUSALS = {
    "alias": _("anchors and aliases (&name, *name) are not accepted; write each value out"),
    "merge": _("merge keys (<<) are not accepted; write the fields out"),
    "depth": _("nested more than %(max)d levels deep"),
    "nodes": _("more than %(max)d values; a document this large is refused"),
    "value": _("this value cannot be read (a date or number out of range?); put it in quotes"),
    "control": _("the text contains a control character (such as NUL), which YAML does not allow"),
}
_POSITION = re.compile(r"position (\d+)")


class YamlRefused(ValueError):
    """YAML that was not read. The message says where and why; it never quotes the text."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        self.line, self.column = line, column
        super().__init__(message)


class _Mark(Protocol):
    """Where PyYAML or libyaml stopped (both kinds of mark), counted from 0."""

    line: int
    column: int


def _located(mark: _Mark | None, problem: str) -> YamlRefused:
    if mark is None:
        return YamlRefused(gettext("The YAML cannot be read: %(problem)s.") % {"problem": problem})
    line, column = mark.line + 1, mark.column + 1
    text = gettext("Line %(line)d, column %(column)d: %(problem)s.")
    return YamlRefused(text % {"line": line, "column": column, "problem": problem}, line, column)


class _GuardedComposer(Composer):
    """PyYAML's composer, refusing anchors, aliases, merge keys, deep nesting and huge texts
    before they are built (the counts are checked on the way down, not after)."""

    peek_event: Callable[[], Event]  # the parser's, beside this class in the loader

    def __init__(self, max_nodes: int) -> None:
        super().__init__()
        self.max_nodes = max_nodes
        self.depth = 0
        self.nodes = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        mark = event.start_mark
        if isinstance(event, AliasEvent) or (isinstance(event, NodeEvent) and event.anchor):
            raise _located(mark, str(_REFUSALS["alias"]))
        if isinstance(event, ScalarEvent) and event.value == "<<" and event.implicit[0]:
            raise _located(mark, str(_REFUSALS["merge"]))
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise _located(mark, str(_REFUSALS["nodes"]) % {"max": self.max_nodes})
        if isinstance(event, CollectionStartEvent):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _located(mark, str(_REFUSALS["depth"]) % {"max": MAX_DEPTH})
        try:
            return super().compose_node(parent, index)
        finally:
            if isinstance(event, CollectionStartEvent):
                self.depth -= 1


class _Loader(_GuardedComposer, CParser, SafeConstructor, Resolver):
    """libyaml's parser (fast), our composer, PyYAML's safe constructor (plain values only)."""

    def __init__(self, text: str, max_nodes: int) -> None:
        CParser.__init__(self, text)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        _GuardedComposer.__init__(self, max_nodes)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        """A date or number Python cannot hold (2024-13-45, 5,000 digits) is the user's error."""
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError):
            raise _located(node.start_mark, str(_REFUSALS["value"])) from None


def _plain(problem: str) -> str:
    for fragment, words in _PROBLEMS:
        if fragment in problem:
            return str(words)
    return gettext("the YAML is not well formed here")


def _reader_refusal(error: ReaderError, text: str) -> YamlRefused:
    """libyaml's reader names a byte offset; people count lines and columns."""
    found = _POSITION.search(str(error))
    if found is None:
        return _located(None, str(_REFUSALS["control"]))
    before = text.encode()[: int(found[1])].decode(errors="ignore")
    line = before.count("\n")
    mark = Mark("", 0, line, len(before) - before.rfind("\n") - 1, "", 0)
    return _located(mark, str(_REFUSALS["control"]))


def load_yaml(text: str, what: str, max_bytes: int, max_nodes: int = SPEC_MAX_NODES) -> Any:
    """The one document of `text` as plain values, or YamlRefused (where, and what was expected).
    `what` names the document in the size message (already translated)."""
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        raise YamlRefused(gettext("The text is not valid UTF-8.")) from None
    if size > max_bytes:
        message = gettext("The %(what)s is larger than %(size)d KiB.")
        raise YamlRefused(message % {"what": what, "size": max_bytes // 1024})
    loader = _Loader(text, max_nodes)
    try:
        return loader.get_single_data()
    except ReaderError as error:
        raise _reader_refusal(error, text) from None
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        raise _located(mark, _plain(error.problem or "")) from None
    except YAMLError:
        raise _located(None, gettext("the YAML is not well formed")) from None
    finally:
        loader.dispose()
