"""State in the ExecuTorch program: the buffers a program writes (a step counter, a KV cache) and
the inputs it writes, emitted as exir emits them.

* **Which buffers.** ``written_buffers``: the signature's buffer mutations and the top graph's
  in-place ops on a buffer or lifted tensor constant (``lower.state_weights``). A write through
  a view of one (``k[:, :, 2:4] = v``) is found only while lowering (``late_buffers``): the
  converter then lowers the program again with it declared.
* **A buffer is a planned tensor, not a constant.** ``declare_buffers`` binds its placeholder to
  a tensor of the arena before lowering, so every read sees the state. The memory plan keeps it
  live from before the first instruction to past the last (``Plan.state``): no other tensor
  shares its bytes, and its value carries from one ``execute()`` of a loaded method to the next,
  as exir's memory planning keeps a mutable buffer (never freed). Its value when the method is
  loaded is the buffer's saved value (``TensorValue.initial``): the writer stores it in the
  mutable data segment (``Program.mutable_data_segments``), which the runtime copies into the
  arena at method load (exir does this for buffers ``InitializedMutableBufferPass`` marks; its
  default leaves the initial value undefined, pt2x always stores it, so the first call matches
  eager).
* **The write-back.** ``write_back`` appends one ``aten::copy_(state, new value)`` per written
  buffer or input whose new value is another tensor, after the graph (exir's
  ``insert_write_back_for_buffers_pass``); a buffer never rebound needs none.
* **A written input** gets the same ``copy_`` into its planned memory, and that input is also
  returned: the mutated inputs come first among the outputs, in input order, then the user
  outputs (exir's order; the caller's tensor is not written, ExecuTorch copies an input in).
* **Refused** (``ConversionError``): a parameter written (ExecuTorch keeps parameters constant;
  its state is buffers), a buffer of dynamic shape; a buffer other than float32 is reported as
  an unsupported value.
"""

from __future__ import annotations

from ..aten.graph import ProgramView
from ..aten.lower import state_weights
from ..errors import ConversionError, Unsupported
from .constants import shared_buffers
from .context import Ctx
from .program import Plan, TensorValue

__all__ = ["refuse_parameters", "written_buffers", "declare_buffers", "late_buffers", "write_back",
           "initial_buffers"]


def _refuse_parameter(view: ProgramView, fqn: str, how: str) -> None:
    raise ConversionError(f"the program writes parameter {fqn!r} ({how}): ExecuTorch keeps parameters constant "
                          "(its mutable state is buffers)", member=view.member)


def refuse_parameters(view: ProgramView) -> None:
    """A parameter the signature says the program writes is refused before anything is lowered (one
    written in place is refused after, ``late_buffers``)."""
    for m in view.mutations:
        if m.kind == "parameter":
            _refuse_parameter(view, m.target, "a parameter mutation in its signature")


def written_buffers(view: ProgramView) -> list[str]:
    """The buffer (or lifted tensor constant) placeholders the program writes, found before lowering."""
    return [name for name in state_weights(view) if view.weights[name].kind != "parameter"]  # refused first


def declare_buffers(view: ProgramView, ctx: Ctx, names: list[str]) -> None:
    """Each written buffer a planned tensor of ``ctx.plan.state``, bound to its placeholder."""
    for name in names:
        w, info = view.weights[name], view.tensor(name)
        try:
            v = ctx.new_tensor(name, info.dtype, info.shape, f"buffer {w.fqn!r}")
        except Unsupported as e:
            ctx.state.problems.add_value("mutable buffer", w.fqn, e.reason)
            ctx.state.poisoned.add(name)
            continue
        if v.dynamic:
            raise ConversionError(f"buffer {w.fqn!r} has a dynamic shape: ExecuTorch plans a mutable buffer "
                                  "once, at a fixed size", member=view.member)
        v.initial = name
        ctx.env[name] = v.name
        ctx.plan.state.append(v)


def late_buffers(view: ProgramView, ctx: Ctx, declared: list[str]) -> list[str]:
    """Weights the lowering found written (through a view of them) that were not declared state."""
    out = []
    for name in ctx.state.mutated:
        w = view.weights.get(name)
        if w is None or name in declared:
            continue
        if w.kind == "parameter":
            _refuse_parameter(view, w.fqn, "in place")
        out.append(name)
    return out


def _new_values(view: ProgramView, ctx: Ctx) -> dict[str, str]:
    """Written placeholder (buffer or user input) -> the plan value holding its contents after the
    call: the signature's mutations (functional IR), then in-place writes (training IR)."""
    by_fqn = {w.fqn: name for name, w in view.weights.items()}
    out: dict[str, str] = {}
    for m in view.mutations:
        placeholder = by_fqn.get(m.target) if m.kind == "buffer" else m.target
        if placeholder is None or m.value not in ctx.env:
            raise ConversionError(f"the {m.kind} mutation of {m.target!r} names no converted value ({m.value!r})",
                                  member=view.member)
        out[placeholder] = ctx.env[m.value]
    for placeholder, value in ctx.state.mutated.items():
        out.setdefault(placeholder, value)
    return out


def write_back(view: ProgramView, ctx: Ctx) -> None:
    """One ``copy_`` per written buffer or input, after the graph; the written inputs become the
    first outputs (in input order)."""
    inputs = dict(zip((u.name for u in view.tensor_user_inputs), ctx.plan.inputs))
    buffers = {v.initial: v for v in ctx.plan.state}
    written_inputs = []
    new_values = _new_values(view, ctx)
    unplanned = sorted(set(new_values) - set(buffers) - set(inputs))
    if unplanned:  # never dropped: a write nothing carries would be silently lost
        raise ConversionError(f"the program writes {', '.join(unplanned)}, which is no planned buffer or input",
                              member=view.member)
    targets = {p: buffers.get(p) or inputs[p] for p in [*buffers, *inputs] if p in new_values}
    written = {t.storage(): p for p, t in targets.items()}
    for placeholder, target in targets.items():
        new = ctx.by_name.get(new_values[placeholder])
        if not isinstance(new, TensorValue):
            raise ConversionError(f"the new value of {placeholder!r} is not a tensor", member=view.member)
        if new is not target:
            if new.storage() in written:  # its old contents: a copy_ before this one may have replaced them
                raise ConversionError(f"the new value of {placeholder!r} is (a view of) the old value of "
                                      f"{written[new.storage()]!r}, which the program writes too: not converted",
                                      member=view.member)
            ctx.call_inplace("copy_", target, {"src": new, "non_blocking": False})
        if placeholder in inputs:
            written_inputs.append(target)
    ctx.plan.outputs[:0] = written_inputs


def initial_buffers(plan: Plan, weights: dict) -> tuple[list, dict[str, int]]:
    """(buffer i+1's array, buffer placeholder -> its index in the mutable data segment): each
    mutable buffer's value at method load, byte-identical ones (zeroed caches) sharing one."""
    return shared_buffers([v.initial for v in plan.state], weights)
