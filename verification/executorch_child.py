"""The ExecuTorch child of ``pte_run.run_executorch``: ``python -m pt2x.verification.executorch_child DIR N [DATA]``.

Reads ``DIR/model.pte`` and ``DIR/in<i>.npz`` (``arr_0..``, in input order) for ``i < N``, loads
the program in ExecuTorch's runtime (``executorch.runtime``, its portable kernels and the
backends its pybindings register; ``DATA``: the ``.ptd`` its external weights are read from),
runs ``forward`` on each set, and writes ``DIR/out<i>.npz`` (``o<j>``: output j) and last
``DIR/result.json`` (the number of inputs and outputs; or ``error``: the runtime's refusal).
The runtime ends the process, with no exception, when it cannot load a method (a key missing
from the data file, a size that differs): then no ``result.json`` is written, and its last
message on stderr is the reason.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from ..serde.torch.eager import arrays_from_tensors, tensors_from_arrays


def main(d: str, n: int, data: str | None) -> None:
    meta: dict = {}
    try:
        from executorch.runtime import Runtime

        program = Runtime.get().load_program(os.path.join(d, "model.pte"), data_path=data)
        method = program.load_method("forward")
        for i in range(n):
            with np.load(os.path.join(d, f"in{i}.npz"), allow_pickle=False) as z:
                feeds = [z[f"arr_{j}"] for j in range(len(z.files))]
            outs = arrays_from_tensors(method.execute(tensors_from_arrays(feeds)))
            np.savez(os.path.join(d, f"out{i}.npz"), **{f"o{j}": x for j, x in enumerate(outs)})
            meta = {"inputs": len(feeds), "outputs": len(outs)}
    except Exception as e:  # the runtime's refusal (load, method, execute): the caller's message
        meta = {"error": f"{type(e).__name__}: {str(e).strip()[:400]}"}
    with open(os.path.join(d, "result.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
