"""The kinds of values a record holds, each with the range check its files enforce.

A field's type says what it holds (``Seconds``, ``Bytes``, ``Count``); the :class:`Check` in its
``Annotated`` metadata is what the file formats (``store.codec``) enforce when they read it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any


@dataclass(frozen=True)
class Check:
    """A range check on a number read from a file; ``what`` names the accepted values in the
    message that refuses another (``expected a positive number, found float -0.04``)."""

    what: str
    accepts: Callable[[Any], bool]


POSITIVE = Check("a positive number", lambda v: math.isfinite(v) and v > 0)
AT_LEAST_ZERO = Check("a number of at least 0", lambda v: math.isfinite(v) and v >= 0)
POSITIVE_INT = Check("a positive int", lambda v: v > 0)
COUNT = Check("an int of at least 0", lambda v: v >= 0)
NONEMPTY = Check("at least one value", lambda v: len(v) > 0)
PROBABILITY = Check("a probability between 0 and 1", lambda v: math.isfinite(v) and 0 <= v <= 1)

#: durations (a step, a sample's calibration, ...)
Seconds = Annotated[float, POSITIVE]
#: a figure that may be zero (a phase's time, joules, a share)
NonNegative = Annotated[float, AT_LEAST_ZERO]
#: a figure that must be above zero (FLOP/s, a ratio)
Positive = Annotated[float, POSITIVE]
#: things counted (graph breaks, samples, recompiles, bytes)
Count = Annotated[int, COUNT]
Bytes = Annotated[int, COUNT]
#: batch sizes, thread counts, ranks
PositiveInt = Annotated[int, POSITIVE_INT]
#: error rates and p-values
Probability = Annotated[float, PROBABILITY]
