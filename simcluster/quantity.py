"""Resource quantities ("500m", "2", "16Gi") reduced to integers the scheduler can add up."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_PATTERN = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


class QuantityError(ValueError):
    """Text that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    """The quantity as an exact decimal number of base units."""
    text = str(value).strip()
    match = _PATTERN.match(text)
    if not match:
        raise QuantityError(f"quantities must match the regular expression {_PATTERN.pattern!r}")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation as error:
        raise QuantityError(str(error)) from None
    return number * _SUFFIXES[match.group(2) or ""]


@lru_cache(maxsize=4096)
def scaled_amount(resource: str, value: str | int | float) -> int:
    """Millicores for cpu, whole units (bytes, GPUs, pods) for everything else.

    CPU is the one resource the scheduler counts in thousandths; rounding up matches how the
    API server canonicalises `0.0001` to `1m`.
    """
    amount = parse_quantity(value)
    if resource == "cpu":
        amount *= 1000
    return int(amount.to_integral_value(rounding="ROUND_CEILING"))
