"""Who writes and who reads what in a ``Plan``: the facts the partitioner, the op checks and the
XNNGraph builder share.

Tensors are keyed by their storage (a view shares its base's); ``Int`` values (run-time sizes)
by themselves. The plan's calls may include ``QuantOp``s (a PT2E quantize or dequantize standing
for its portable calls: ``int8.fold``). A call's arguments are read by the kernel's schema names (``args(call)``).
"""

from __future__ import annotations

from ..kernels import kernel
from ..program import Call, ListValue, Plan, QuantOp, ScalarValue, TensorValue

__all__ = ["PlanIndex", "flat_values", "kernel_key"]

# kernels that, on a constant, are folded into it (a numpy view of the weight)
_FOLDED = ("permute_copy.out", "transpose_copy.int_out", "slice_copy.Tensor_out", "select_copy.int_out")


# kernels whose (first) output has its input's shape, run-time dims included
_SHAPE_KEEPING = {"_native_batch_norm_legit_no_training.out", "relu.out", "hardtanh.out", "clamp.out", "gelu.out",
                  "sigmoid.out", "tanh.out", "clone.out", "native_layer_norm.out", "_softmax.out"}


def kernel_key(c) -> str:
    """``addmm.out`` for aten::addmm / out, ``executorch_prim::mul.Scalar`` for a prim op,
    ``quantized_decomposed::quantize_per_tensor`` for a ``QuantOp``."""
    name, overload = c.op
    name = name.removeprefix("aten::")
    return f"{name}.{overload}" if overload else name  # an in-place kernel (copy_) has no overload name


def flat_values(values):
    """Every value among ``values``, a list's items included."""
    for v in values:
        if isinstance(v, ListValue):
            yield from flat_values(v.items)
        yield v


class PlanIndex:
    def __init__(self, plan: Plan, weights: dict, shapes: dict | None = None, input_names: list | None = None):
        self.plan = plan
        self.weights = weights  # placeholder name -> the archive's weight (``.array``)
        self.shapes = shapes or {}  # the program's tensor name -> its TensorInfo (dims: int or symbolic)
        # the plan's inputs by the program's names (the plan may rename one: ``x`` -> ``x_1``)
        self.input_name = {id(t): n for t, n in zip(plan.inputs, input_names or ())
                           if len(plan.inputs) == len(input_names or ())}
        self.position = {id(c): i for i, c in enumerate(plan.calls)}
        self.writer: dict = {}  # storage -> the call writing it
        self.int_writer: dict = {}  # id(Int ScalarValue) -> the prim call returning it
        self.readers: dict = {}  # storage or id(Int) -> calls reading it, in order
        for c in plan.calls:
            for t in c.writes:
                self.writer[t.storage()] = c
            if isinstance(c, Call) and not c.writes and c.args and isinstance(c.args[-1], ScalarValue):
                self.int_writer[id(c.args[-1])] = c
            for v in set(flat_values(c.args[:self.n_inputs(c)])):
                key = self.key(v)
                if key is not None:
                    self.readers.setdefault(key, []).append(c)
        self.plan_outputs = {t.storage() for t in plan.outputs if isinstance(t, TensorValue)}

    # ------------------------------------------------------------------ values

    @staticmethod
    def key(v):
        if isinstance(v, TensorValue):
            return v.storage()
        if isinstance(v, ScalarValue) and v.kind == "Int" and v.name:
            return id(v)
        return None

    @staticmethod
    def n_inputs(c) -> int:
        """How many of a call's arguments are inputs (the rest: its outs and its returned value)."""
        return len(kernel(kernel_key(c)).inputs) if isinstance(c, Call) else len(c.reads)

    @staticmethod
    def args(c) -> dict:
        """A kernel call's inputs by schema name (a ``QuantOp``'s: ``self``)."""
        if isinstance(c, QuantOp):
            return {"self": c.source}
        return dict(zip((a.name for a in kernel(kernel_key(c)).inputs), c.args))

    def constant_view(self, t):
        """(a key naming it, a numpy view) when ``t`` is a weight, or a permute, transpose, slice
        or select of one (folded: XNNPACK reads the view's bytes); else None."""
        if not isinstance(t, TensorValue):
            return None
        found = self._storage_view(t.storage())
        if found is None or found[1].shape == tuple(t.sizes):
            return found
        key, arr = found  # ``t`` is a static view of it (the same bytes, other sizes)
        if not arr.flags.c_contiguous:
            return None  # a reshape would copy the whole weight
        return f"{key}|view{','.join(map(str, t.sizes))}", arr.reshape(t.sizes)

    def _storage_view(self, s: TensorValue):
        if s.weight is not None:  # keyed by its fully qualified name, as the .ptd keys a weight
            w = self.weights[s.weight]
            return w.fqn or s.weight, w.array
        c = self.writer.get(s)
        if not isinstance(c, Call) or kernel_key(c) not in _FOLDED:
            return None
        a = self.args(c)
        src = self.constant_view(a["self"])
        if src is None or any(self.run_time_int(x) for x in flat_values(list(a.values()))):
            return None
        key, arr = src
        if arr.ndim == 0:
            return None
        lit = {k: (v.value if isinstance(v, ScalarValue) and v.kind != "Null" else None)
               for k, v in a.items() if not isinstance(v, (TensorValue, ListValue))}
        kind = kernel_key(c)
        if kind == "permute_copy.out":
            perm = [int(x.value) % arr.ndim for x in a["dims"].items]
            return f"{key}|permute{','.join(map(str, perm))}", arr.transpose(perm)
        if kind == "transpose_copy.int_out":
            perm = list(range(arr.ndim))
            i, j = lit["dim0"] % arr.ndim, lit["dim1"] % arr.ndim
            perm[i], perm[j] = perm[j], perm[i]
            return f"{key}|permute{','.join(map(str, perm))}", arr.transpose(perm)
        dim = lit["dim"] % arr.ndim
        index = [slice(None)] * arr.ndim
        if kind == "select_copy.int_out":
            index[dim] = lit["index"]
            view = arr[tuple(index)]
        else:
            index[dim] = slice(lit["start"], lit["end"], lit["step"])
            view = arr[tuple(index)]
        if view.shape != tuple(c.writes[0].storage().sizes):
            return None
        return f"{key}|{kind.split('_copy')[0]}{dim}:{lit.get('start')}:{lit.get('end')}:{lit.get('step')}:{lit.get('index')}", view

    def dynamic_dims(self, t: TensorValue) -> tuple | None:
        """Which of ``t``'s dims are sized at run time, or None when it is not known (an internal
        tensor of a dynamic program)."""
        if not t.dynamic:
            return (False,) * len(t.sizes)
        info = self.shapes.get(self.input_name.get(id(t), t.name))
        if info is not None and len(info.shape) == len(t.sizes):
            return tuple(not isinstance(d, int) for d in info.shape)
        return self._derived_dims(t)

    def _derived_dims(self, t: TensorValue) -> tuple | None:
        """An internal tensor's run-time dims from the call writing it: its input's for a kernel that
        keeps the shape, a ``view_copy``'s size list (its run-time ints), a permute or transpose of a
        tensor whose dims are known."""
        c = self.writer.get(t.storage())
        if not isinstance(c, Call) or t is not t.storage() or t is not c.writes[0]:
            return None
        key, a = kernel_key(c), self.args(c)
        if any(self.run_time_int(v) for v in flat_values([v for k, v in a.items() if k not in ("self", "size")])):
            return None
        if key in _SHAPE_KEEPING:
            src = a.get("self", a.get("input"))
            return self.dynamic_dims(src) if isinstance(src, TensorValue) and src.sizes == t.sizes else None
        if key == "view_copy.out" and len(a["size"].items) == len(t.sizes):
            return tuple(self.run_time_int(s) for s in a["size"].items)
        if key in ("permute_copy.out", "transpose_copy.int_out"):
            src = self.dynamic_dims(a["self"])
            if src is None:
                return None
            if key == "permute_copy.out":
                return tuple(src[int(x.value) % len(src)] for x in a["dims"].items)
            perm = list(range(len(src)))
            i, j = int(a["dim0"].value) % len(src), int(a["dim1"].value) % len(src)
            perm[i], perm[j] = perm[j], perm[i]
            return tuple(src[p] for p in perm)
        return None

    def static_dims(self, t: TensorValue, dims) -> bool:
        """Whether ``t``'s ``dims`` are all known before it runs."""
        dyn = self.dynamic_dims(t)
        return dyn is not None and not any(dyn[d] for d in dims)

    def is_weight(self, t) -> bool:
        return isinstance(t, TensorValue) and t.storage().weight is not None

    def run_time_int(self, v) -> bool:
        """An Int computed at run time (a size), not a literal."""
        return isinstance(v, ScalarValue) and id(v) in self.int_writer

    def producers(self, c) -> list:
        """The calls whose results ``c`` reads (tensors and run-time Ints), each once."""
        out = []
        for v in flat_values(c.args[:self.n_inputs(c)]):
            p = self.writer.get(v.storage()) if isinstance(v, TensorValue) else self.int_writer.get(id(v))
            if p is not None and p is not c and p not in out:
                out.append(p)
        return out

    def sole_reader(self, t: TensorValue):
        """The one call reading ``t``'s storage, when it has exactly one and is no plan output."""
        s = t.storage()
        readers = self.readers.get(s, [])
        if s in self.plan_outputs or len(readers) != 1:
            return None
        return readers[0]

    def read_elsewhere(self, t: TensorValue) -> bool:
        """Whether anything reads ``t`` (a scratch output such as a pool's indices)."""
        s = t.storage()
        return s in self.plan_outputs or bool(self.readers.get(s))
