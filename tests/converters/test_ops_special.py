"""converters/onnx/ops_special.py: each lowering on a program torch exports at test time, converted to
ONNX (run in ONNX Runtime) and TFLite (run in LiteRT), compared with eager; float inputs include the
values where the composites are delicate (0, -0.0, +-inf, NaN, large |x| where ``1 - erf`` is all
rounding), integer and boolean inputs where torch promotes them, 0-d and empty tensors."""

from __future__ import annotations

import math

import pytest
import torch

from pt2x.converters import to_onnx
from pt2x.converters.errors import UnsupportedOpsError

pytest.importorskip("ai_edge_litert", reason="LiteRT runs the converted files")
from op_parity import check_both, saved as _saved  # noqa: E402


NAN, INF = math.nan, math.inf
EDGE = torch.tensor([0.0, -0.0, 0.3, -0.7, 1.5, -2.5, 4.0, -6.0, 9.0, 12.0, -30.0, 1e6, INF, -INF, NAN])
UNIT = torch.tensor([0.0, -0.0, 0.2, 0.5, 0.7, -0.71, 0.9, 0.999, -0.9999, 1.0, -1.0, 1.5, NAN])
INTS = torch.tensor([0, 1, -1, 3, -7, 12])
BOOLS = torch.tensor([True, False, True])


def _x(t):
    return lambda: (t.clone(),)


UNARY = [
    ("erfc", torch.erfc, EDGE), ("erfc_int", torch.erfc, INTS), ("erfc_0d", torch.erfc, torch.tensor(-1.25)),
    ("erfc_empty", torch.erfc, torch.zeros(1, 0, 3)),
    ("erfcx", torch.special.erfcx, EDGE), ("erfcx_bool", torch.special.erfcx, BOOLS),
    ("ndtr", torch.special.ndtr, EDGE), ("log_ndtr", torch.special.log_ndtr, EDGE),
    ("log_ndtr_int", torch.special.log_ndtr, INTS),
    ("logit", torch.logit, UNIT), ("logit_eps", lambda x: torch.logit(x, eps=0.05), UNIT),
    ("logit_bool_0d", torch.logit, torch.tensor(True)),
    ("sinc", torch.sinc, EDGE), ("sinc_int", torch.sinc, INTS),
    ("entr", torch.special.entr, EDGE), ("entr_int", torch.special.entr, INTS),
    ("deg2rad", torch.deg2rad, EDGE), ("rad2deg_int", torch.rad2deg, INTS), ("deg2rad_bool", torch.deg2rad, BOOLS),
    ("isposinf", torch.isposinf, EDGE), ("isneginf", torch.isneginf, EDGE), ("isposinf_int", torch.isposinf, INTS),
    ("signbit_int", torch.signbit, INTS), ("signbit_bool", torch.signbit, BOOLS),
    ("angle", torch.angle, EDGE), ("angle_int", torch.angle, INTS),
    ("erfinv", torch.erfinv, UNIT), ("erfinv_bool", torch.erfinv, BOOLS),
    # ops_pointwise.py: the modified Bessel functions (Cephes' series, |x| <= 8 and beyond)
    ("i0", torch.i0, EDGE[:-4]), ("i0_nan_inf", torch.i0, EDGE[-3:]), ("i0e", torch.special.i0e, EDGE),
    ("i1", torch.special.i1, EDGE[:-4]), ("i1e", torch.special.i1e, EDGE), ("i1e_int", torch.special.i1e, INTS),
    ("modified_bessel_i0", torch.special.modified_bessel_i0, EDGE[:-4]),
    ("modified_bessel_i1_bool", torch.special.modified_bessel_i1, BOOLS),
    ("modified_bessel_k0", torch.special.modified_bessel_k0, EDGE), ("modified_bessel_k1_int", torch.special.modified_bessel_k1, INTS),
    ("scaled_modified_bessel_k0", torch.special.scaled_modified_bessel_k0, EDGE),
    ("scaled_modified_bessel_k1", torch.special.scaled_modified_bessel_k1, EDGE),
    ("spherical_bessel_j0", torch.special.spherical_bessel_j0, EDGE),
    ("bessel_j0", torch.special.bessel_j0, EDGE[:-4]), ("bessel_j1", torch.special.bessel_j1, EDGE[:-4]),
    ("bessel_y0", torch.special.bessel_y0, EDGE[:-4]), ("bessel_y1_int", torch.special.bessel_y1, INTS),
    ("bessel_y1_nan", torch.special.bessel_y1, EDGE[-1:]),
    ("airy_ai", torch.special.airy_ai, torch.tensor([-30.0, -5.5, -2.09, -1.0, 0.0, 0.5, 2.0, 2.09, 5.0, 9.0, 50.0, 200.0,
                                                     INF, -INF, NAN])), ("airy_ai_int", torch.special.airy_ai, INTS), ("ndtri", torch.special.ndtri, UNIT.abs()),
    ("digamma", torch.digamma, torch.tensor([0.0, -0.0, -1.0, -2.5, -0.999, 0.001, 3.7, 10.0, 12.5, 1e20, INF, -INF, NAN])),
    ("polygamma_0_int", lambda x: torch.polygamma(0, x), INTS),
    # trigamma copies torch's sinf(pi_f x) at the poles (finite there): negative integers included
    ("polygamma_1", lambda x: torch.polygamma(1, x), torch.tensor([-3.0, -1.0, -0.5, -1e-3, 0.0, 0.3, 0.5, 2.0, 7.5, 40.0,
                                                              -12345.25, INF, NAN])),
    ("polygamma_1_int", lambda x: torch.special.polygamma(1, x), torch.tensor([-9, -4, -1, 0, 1, 5, 1000])),
    ("lgamma", torch.lgamma, torch.tensor([0.0, -0.0, 1.0, 2.0, 0.9, 1.1, 2.01, 3.49, 3.51, 1e-20, 50.0, 1e30, -0.5,
                                          -2.457, -7.0, -1e30, INF, -INF, NAN])), ("lgamma_int", torch.lgamma, INTS),
    ("mvlgamma_3", lambda x: torch.mvlgamma(x, 3), torch.tensor([1.01, 1.5, 2.0, 7.25, 40.0])),
    ("ndtri_tails", torch.special.ndtri, torch.tensor([1e-30, 1e-10, 1e-3, 0.13, 0.14, 0.86, 0.87, 0.99999])),
]


@pytest.mark.parametrize("name,fn,x", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, fn, x, tmp_path):
    check_both(fn, x.clone(), tmp_path=tmp_path)


A = torch.tensor([0.0, 1.0, -2.5, NAN, INF, 0.0, 3.0, -0.0])
B = torch.tensor([NAN, 0.0, 2.0, 1.0, 0.5, -1.0, INF, -0.5])
BINARY = [
    ("xlogy", torch.xlogy, A, B), ("xlogy_scalar_self", lambda y: torch.xlogy(2.0, y), B),
    ("xlogy_int_0d", torch.xlogy, INTS, torch.tensor(3)),
    ("xlog1py", torch.special.xlog1py, A, B), ("xlog1py_small", torch.special.xlog1py, A, B * 1e-5),
    ("heaviside", torch.heaviside, A, B), ("heaviside_int", torch.heaviside, INTS, torch.tensor(5)),
    ("heaviside_bool", torch.heaviside, BOOLS, torch.tensor([False, True, True])),
    ("ldexp", torch.ldexp, A, torch.tensor([1, 2, -3, 0, 5, 200, -200, 4])),
    ("ldexp_int", torch.ldexp, INTS, torch.tensor(3)), ("ldexp_float_exp", torch.ldexp, A, B),
    ("isclose", torch.isclose, A, A + 1e-9), ("isclose_nan", lambda a, b: torch.isclose(a, b, 0.1, 0.5, True), A, B),
    ("isclose_int", lambda a, b: torch.isclose(a, b, rtol=0.5, atol=1), INTS, torch.tensor([0, 2, 1, 3, -9, 6])),
    ("copysign_int_sign", torch.copysign, A[:6], INTS),
    ("copysign_bool_broadcast", torch.copysign, torch.tensor([[1.5], [-2.0]]), torch.tensor([True, False, True])), ("copysign_scalar", lambda x: torch.copysign(x, -0.0), A),
]


@pytest.mark.parametrize("name,fn,args", [(b[0], b[1], b[2:]) for b in BINARY], ids=[b[0] for b in BINARY])
def test_binary(name, fn, args, tmp_path):
    check_both(fn, *[a.clone() for a in args], tmp_path=tmp_path)


SHIFTS = torch.tensor([0, 1, -1, 3, 63, 64, 65, 100])
VALUES = torch.tensor([5, -5, 7, -2**62, 2**62, 1, -1, 9])


@pytest.mark.parametrize("fn", [torch.bitwise_left_shift, torch.bitwise_right_shift], ids=["left", "right"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.uint8], ids=str)
def test_bit_shifts(fn, dtype, tmp_path):
    # counts < 0 or past the width: 0 (left), the sign fill (right); ONNX only: LiteRT's BitShift is uint8-only
    x = VALUES.to(dtype) if dtype == torch.int64 else VALUES.clamp(-100, 100).to(dtype)
    s = SHIFTS if dtype == torch.int64 else SHIFTS.clamp(-1, 9).to(dtype)
    check_both(fn, x, s, tmp_path=tmp_path, tflite_refuses="UINT64")


@pytest.mark.parametrize("fn,args", [
    (torch.signbit, (torch.tensor([1.0, -0.0]),)),
    (torch.copysign, (torch.tensor([1.0, 2.0]), torch.tensor([-0.0, NAN]))),
    (torch.erfc, (torch.tensor([1.0], dtype=torch.float64),)),
    (lambda x: torch.polygamma(2, x), (torch.tensor([1.5]),)),
], ids=["signbit_float", "copysign_float_sign", "erfc_float64", "polygamma_2"])
def test_refused(fn, args, tmp_path):
    # a NaN's sign bit is not readable in ONNX before BitCast (opset 26); erfc's series is float32's;
    # polygamma n >= 1 sums a series whose length depends on the value
    with pytest.raises(UnsupportedOpsError):
        to_onnx(_saved(fn, args, tmp_path))
