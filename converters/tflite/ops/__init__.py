"""The ONNX op -> TFLite builtins mappers: importing this package fills ``mappers.MAPPERS``.

One module per family of ONNX ops (``elementwise``, ``shape``, ``slice``, ``nn`` with
``depthwise_split`` for depthwise kernels over 25 taps, ``pool``, ``resize`` on ``resize_weights``,
``rnn`` and ``rnn_while`` on ``rnn_cells``, ``control`` for If/Loop subgraphs, ...), each mapper
behind ``core.op_attributes``' declared attributes. docs/tflite.md says what is supported and why
the rest is not.
"""

from ..core.mappers import MAPPERS
from . import activation  # noqa: F401
from . import affine_grid  # noqa: F401
from . import aliases  # noqa: F401
from . import attention  # noqa: F401
from . import bitshift  # noqa: F401
from . import bitwise  # noqa: F401
from . import blocks  # noqa: F401
from . import causal_conv  # noqa: F401
from . import compress  # noqa: F401
from . import control  # noqa: F401
from . import crop  # noqa: F401
from . import cumprod  # noqa: F401
from . import einsum  # noqa: F401
from . import elementwise  # noqa: F401
from . import eye_like  # noqa: F401
from . import generate  # noqa: F401
from . import gridsample  # noqa: F401
from . import index  # noqa: F401
from . import linalg  # noqa: F401
from . import linear_attention  # noqa: F401
from . import loss  # noqa: F401
from . import nn  # noqa: F401
from . import pad  # noqa: F401
from . import pool  # noqa: F401
from . import quantize  # noqa: F401
from . import reduce  # noqa: F401
from . import resize  # noqa: F401
from . import rnn  # noqa: F401
from . import rnn_while  # noqa: F401
from . import rotary  # noqa: F401
from . import scan  # noqa: F401
from . import shape  # noqa: F401
from . import signal  # noqa: F401
from . import slice  # noqa: F401

__all__ = ["MAPPERS"]
