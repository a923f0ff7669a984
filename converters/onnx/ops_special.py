"""Special functions and value predicates: ``erfc``, ``logit``, ``sinc``, ``xlogy``, the normal
distribution's ``ndtr``/``log_ndtr``, ``entr``, angle conversions, sign and infinity tests,
``heaviside``, ``ldexp``, ``isclose``, ``copysign``, bit shifts."""

from __future__ import annotations
