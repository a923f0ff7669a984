"""Reductions, cumulative scans and order statistics (issue 33's reduce/sort family), each a
program torch exports at test time, converted to ONNX (run in ONNX Runtime) and to TFLite (run
in LiteRT), compared with eager: NaN placement, 0-d and empty inputs, int and bool dtypes, and
a dynamic first dim (the cumulative scans then run in a Loop/WHILE)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("ai_edge_litert", reason="LiteRT runs the converted files")
from op_parity import check_both  # noqa: E402


NAN, INF = float("nan"), float("inf")
# rows with NaN, repeated values and infinities; no row is all NaN where an index is compared
X = torch.tensor([[3., NAN, 1., 7., 2.], [2., 5., 1.5, 0., -1.], [4., NAN, NAN, 6., 8.], [1., 2, 3, 4, 5]])
I = torch.tensor([[3, 1, 2, 9], [0, -5, 7, 1], [6, 8, -2, 4]])
C = torch.tensor([[1., 3, 3, NAN, 2, NAN, 9], [-INF, -INF, 0, 5, 5, INF, INF], [-1000., 0, -1000, 3, 1, 1, 0]])
S0 = torch.tensor(3.)
U = torch.tensor([[3., NAN, 1.], [1., NAN, 3.], [2., 2., -0.]])
SQ = torch.tensor([[1., 3, 5, 7, 9], [2., 4, 6, 8, 10]])
V = torch.tensor([[3., 6, NAN, 0], [11., 2, 4, 4.5]])
SEG = torch.tensor([1., 5, 3, NAN, 4, -2])

CASES = {
    # reductions
    "std.default": (torch.std, X[1]),
    "var_mean.default/empty": (lambda x: torch.var_mean(x, False), torch.zeros(0)),
    "std.default/0-d": (torch.std, S0),
    "nansum": (torch.nansum, X),
    "nansum/int,dim": (lambda x: torch.nansum(x, 1), I),
    "nansum/bool,0-d": (torch.nansum, torch.tensor(True)),
    "nanmean/dim,keepdim": (lambda x: torch.nanmean(x, 1, True), X),
    "count_nonzero/float": (torch.count_nonzero, X),
    "count_nonzero/bool,dims": (lambda x: torch.count_nonzero(x, (0, 1)), I > 0),
    "count_nonzero/int,0-d": (torch.count_nonzero, torch.tensor(0)),
    "aminmax": (torch.aminmax, X[1]),
    "aminmax/bool,dim": (lambda x: torch.aminmax(x, dim=1, keepdim=True), I > 0),
    "bincount/weights": (lambda x, w: torch.bincount(x, w), torch.tensor([1, 1, 4]), torch.tensor([.5, 2., 3.])),
    "bincount/empty,minlength": (lambda x: torch.bincount(x, minlength=3), torch.zeros(0, dtype=torch.long)),
    "histc/edges": (lambda x: torch.histc(x, 3, 0, 10), torch.linspace(-1, 11, 121)),
    "histc/own range,0-d": (lambda x: torch.histc(x, 4), S0),
    # cumulative
    "cumprod/bool": (lambda x: torch.cumprod(x, 1), I > 0),
    "logcumsumexp": (lambda x: torch.logcumsumexp(x, 1), C),
    "logcumsumexp/0-d": (lambda x: torch.logcumsumexp(x, 0), S0),
    "cummax/nan,ties": (lambda x: torch.cummax(x, 1), C),
    "cummin/int": (lambda x: torch.cummin(x, 1), I),
    "cummin/bool": (lambda x: torch.cummin(x, 0), I > 0),
    # order statistics
    "msort/nan": (torch.msort, X),
    "msort/int": (torch.msort, I),
    "msort/0-d": (torch.msort, S0),
    "kthvalue": (lambda x: torch.kthvalue(x, 2, 1), X[[1, 3]]),
    "kthvalue/int,keepdim": (lambda x: torch.kthvalue(x, 3, 0, True), I),
    "median/nan": (torch.median, X),
    "median.dim/nan": (lambda x: torch.median(x, 1), X),
    "nanmedian.dim": (lambda x: torch.nanmedian(x, 1), X),
    "nanmedian/0-d": (torch.nanmedian, S0),
    "quantile/dim": (lambda x: torch.quantile(x, 0.3, 1), X),
    "nanquantile/keepdim": (lambda x: torch.nanquantile(x, 0.3, 1, True), X),
    "nanquantile/midpoint": (lambda x: torch.nanquantile(x, 0.3, 1, interpolation="midpoint"), X),
    "quantile/nearest,0-d": (lambda x: torch.quantile(x, 0.5, interpolation="nearest"), S0),
    # selections
    "argwhere/0-d": (torch.argwhere, torch.tensor(3)),
    "argwhere/empty": (torch.argwhere, torch.zeros(5, 0)),
    "nonzero_numpy": (lambda x: torch.nonzero(x, as_tuple=True), I),
    "nonzero_numpy/0-d": (lambda x: torch.nonzero(x, as_tuple=True), torch.tensor(0.)),
    "nonzero_static/padded": (lambda x: torch.nonzero_static(x, size=5, fill_value=7), I > 2),
    "nonzero_static/0-d": (lambda x: torch.nonzero_static(x, size=1), S0),
    "masked_select/broadcast": (torch.masked_select, I, torch.tensor([True, False, True, True])),
    "masked_select/bool,0-d": (torch.masked_select, torch.tensor(True), torch.tensor(True)),
    "unique/nan,inverse,counts": (lambda x: torch.unique(x, return_inverse=True, return_counts=True), U),
    "unique/bool": (lambda x: torch.unique(x, return_counts=True), I > 2),
    "unique/0-d": (lambda x: torch.unique(x, return_inverse=True), S0),
    "unique/empty": (lambda x: torch.unique(x, return_inverse=True, return_counts=True), torch.zeros(0, 3)),
    "unique_consecutive": (lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True),
                           torch.tensor([1, 1, 2, 2, 2, 1, 3])),
    "unique_consecutive/0-d": (torch.unique_consecutive, torch.tensor(True)),
    # searches
    "searchsorted/rows,nan": (torch.searchsorted, SQ, V),
    "searchsorted/right,int32": (lambda s, v: torch.searchsorted(s, v, side="right", out_int32=True), SQ[0], V),
    "searchsorted/nan in sequence": (torch.searchsorted, torch.tensor([0., 4, NAN]), torch.tensor([5., 3, NAN, -1])),
    "searchsorted/sorter": (lambda s, v, o: torch.searchsorted(s, v, sorter=o), torch.tensor([5., 1, 3]),
                            torch.tensor([2., 5]), torch.tensor([1, 2, 0])),
    "searchsorted/empty": (torch.searchsorted, torch.zeros(0), torch.zeros(0)),
    "bucketize/right": (lambda v, b: torch.bucketize(v, b, right=True), V, SQ[0]),
    "bucketize/int,0-d": (torch.bucketize, torch.tensor(4), torch.tensor([1, 4, 4, 6])),
    "isin/nan": (torch.isin, X, torch.tensor([1., NAN, 5.])),
    "isin/invert,int": (lambda e, t: torch.isin(e, t, invert=True), I, torch.tensor([1, 2, 3])),
    "isin/scalar": (lambda e: torch.isin(e, 2), I),
    # index_reduce, segment_reduce, mode
    "index_reduce/amax,nan": (lambda s, i, src: s.index_reduce(0, i, src, "amax"), torch.tensor([1., NAN, 3, -2]),
                              torch.tensor([0, 1, 2, 2, 0]), torch.tensor([NAN, 2, 4, -7, 2.5])),
    "index_reduce/amin,int,exclude self": (lambda s, i, src: s.index_reduce(0, i, src, "amin", include_self=False),
                                           torch.tensor([5, 7, -9, 4]), torch.tensor([0, 0, 2, 2]),
                                           torch.tensor([2, 3, 4, 2])),
    "index_reduce/mean,int floors": (lambda s, i, src: s.index_reduce(0, i, src, "mean"), torch.tensor([5, 7, -9, 4]),
                                     torch.tensor([0, 0, 2, 2]), torch.tensor([2, 3, 4, 2])),
    "index_reduce/prod,dim 1": (lambda s, i, src: s.index_reduce(1, i, src, "prod", include_self=False),
                                torch.tensor([[1., 5], [3, 4], [2, 2]]), torch.tensor([1, 1, 0]),
                                torch.tensor([[9., 2, 3], [1, 1, 1], [-1, 0, 2]])),
    "index_reduce/mean,0-d": (lambda s, i, src: s.index_reduce(0, i, src, "mean"), S0, torch.tensor([0]),
                              torch.tensor(2.)),
    "segment_reduce/max,lengths": (lambda x, n: torch.segment_reduce(x, "max", lengths=n), SEG,
                                   torch.tensor([2, 0, 3, 1])),
    "segment_reduce/mean,offsets,initial": (lambda x, o: torch.segment_reduce(x, "mean", offsets=o, initial=-10.), SEG,
                                            torch.tensor([0, 2, 2, 5, 6])),
    "segment_reduce/prod,2-d": (lambda x, n: torch.segment_reduce(x, "prod", lengths=n, initial=10.),
                                torch.stack([SEG, SEG * 2], 1), torch.tensor([2, 0, 3, 1])),
    "mode/nan,ties": (lambda x: torch.mode(x, 1),
                      torch.tensor([[2., 1, 2, 1, 5], [3., 1, 2, 0, 7], [1., NAN, NAN, 4, 4]])),
    "mode/int,keepdim": (lambda x: torch.mode(x, 0, True), torch.tensor([[5, 5, 1], [1, 1, 1], [9, 2, 1], [5, 2, 3]])),
    "mode/bool": (torch.mode, I > 1),
    "mode/0-d": (torch.mode, S0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_static(name, tmp_path):
    fn, *args = CASES[name]
    check_both(fn, *args, tmp_path=tmp_path)


DYNAMIC = {
    "cumprod": (lambda x: torch.cumprod(x, 0), I),
    "logcumsumexp": (lambda x: torch.logcumsumexp(x, 0), C.T.contiguous()),
    "cummax": (lambda x: torch.cummax(x, 0), C.T.contiguous()),
    "msort": (torch.msort, X),
    "nanquantile": (lambda x: torch.nanquantile(x, 0.4, 0), X),
    "var_mean": (lambda x: torch.var_mean(x, 0), X),
    "bucketize": (torch.bucketize, V, SQ[0]),
    "unique": (lambda x: torch.unique(x, return_inverse=True, return_counts=True), U),
    "masked_select": (torch.masked_select, V, V > 3),
    "segment_reduce": (lambda x, n: torch.segment_reduce(x, "max", lengths=n, initial=1.), SEG,
                       torch.tensor([2, 0, 3, 1])),
}


@pytest.mark.parametrize("name", list(DYNAMIC))
def test_dynamic_first_dim(name, tmp_path):
    fn, *args = DYNAMIC[name]
    check_both(fn, *args, tmp_path=tmp_path, dynamic=True)
