"""docs/failures.md lists every shipped failure signature (issue 34, Show: "the signature
table"), with its label and class as the code has them."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.utils import translation

from jobs.status.failure import KUBERNETES, SIGNATURES


def test_it_documents_every_shipped_signature_with_its_label_and_class() -> None:
    text = (Path(settings.BASE_DIR) / "docs" / "failures.md").read_text()
    with translation.override("en"):
        for sig in (*SIGNATURES, *KUBERNETES):
            row = f"| `{sig.code}` | {sig.label} | {sig.failure_class.value} |"
            assert row in text, sig.code
