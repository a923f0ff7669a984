"""torch.export's serialization schema, 8.x, as typed definitions.

Facts (names, field order, types, defaults, enum numbers) follow torch's published
``torch/_export/serde/schema.yaml``; the code is pt2x's own. This file is the single
source of truth: the JSON codec, the snapshot in ``snapshots/`` and every validator
are derived from it. Definitions only — no logic.

JSON encoding (as torch writes it): a struct is an object; a union is an object with
exactly one key; an enum is its integer; a float that is not finite is the string
"Infinity", "-Infinity" or "NaN".
"""

from __future__ import annotations

from dataclasses import field
from typing import Dict, List, Optional

from .kinds import SchemaEnum, Union, struct, union

# ----------------------------------------------------------------------------- enums


class ScalarType(SchemaEnum):
    UNKNOWN = 0
    BYTE = 1
    CHAR = 2
    SHORT = 3
    INT = 4
    LONG = 5
    HALF = 6
    FLOAT = 7
    DOUBLE = 8
    COMPLEXHALF = 9
    COMPLEXFLOAT = 10
    COMPLEXDOUBLE = 11
    BOOL = 12
    BFLOAT16 = 13
    UINT16 = 28
    FLOAT8E4M3FN = 29
    FLOAT8E5M2 = 30
    FLOAT8E4M3FNUZ = 31
    FLOAT8E5M2FNUZ = 32
    FLOAT8E8M0FNU = 33
    UINT32 = 34
    UINT64 = 35


class Layout(SchemaEnum):
    Unknown = 0
    SparseCoo = 1
    SparseCsr = 2
    SparseCsc = 3
    SparseBsr = 4
    SparseBsc = 5
    _mkldnn = 6
    Strided = 7


class MemoryFormat(SchemaEnum):
    Unknown = 0
    ContiguousFormat = 1
    ChannelsLast = 2
    ChannelsLast3d = 3
    PreserveFormat = 4


class ArgumentKind(SchemaEnum):
    UNKNOWN = 0
    POSITIONAL = 1
    KEYWORD = 2


# ------------------------------------------------------------------ symbolic values


@struct
class Device:
    type: str
    index: Optional[int] = None


@union
class SymExprHint(Union):
    as_int: int
    as_bool: bool
    as_float: float


@struct
class SymExpr:
    expr_str: str
    hint: Optional[SymExprHint] = None


@union
class SymInt(Union):
    as_expr: SymExpr
    as_int: int


@union
class SymFloat(Union):
    as_expr: SymExpr
    as_float: float


@union
class SymBool(Union):
    as_expr: SymExpr
    as_bool: bool


@struct
class TensorMeta:
    dtype: ScalarType
    sizes: List[SymInt]
    requires_grad: bool
    device: Device
    strides: List[SymInt]
    storage_offset: SymInt
    layout: Layout


@union
class SymIntArgument(Union):
    as_name: str
    as_int: int


@union
class SymFloatArgument(Union):
    as_name: str
    as_float: float


@union
class SymBoolArgument(Union):
    as_name: str
    as_bool: bool


# ------------------------------------------------------------------------ arguments


@struct
class TensorArgument:
    name: str


@struct
class TokenArgument:
    name: str


@union
class OptionalTensorArgument(Union):
    as_tensor: TensorArgument
    as_none: bool


@struct
class GraphArgument:
    name: str
    graph: Graph


@struct
class CustomObjArgument:
    name: str
    class_fqn: str


@struct
class ComplexValue:
    real: float
    imag: float


@union
class Argument(Union):
    as_none: bool
    as_tensor: TensorArgument
    as_tensors: List[TensorArgument]
    as_int: int
    as_ints: List[int]
    as_float: float
    as_floats: List[float]
    as_string: str
    as_strings: List[str]
    as_sym_int: SymIntArgument
    as_sym_ints: List[SymIntArgument]
    as_scalar_type: ScalarType
    as_memory_format: MemoryFormat
    as_layout: Layout
    as_device: Device
    as_bool: bool
    as_bools: List[bool]
    as_sym_bool: SymBoolArgument
    as_sym_bools: List[SymBoolArgument]
    as_graph: GraphArgument
    as_optional_tensors: List[OptionalTensorArgument]
    as_custom_obj: CustomObjArgument
    as_operator: str
    as_sym_float: SymFloatArgument
    as_sym_floats: List[SymFloatArgument]
    as_optional_tensor: OptionalTensorArgument
    as_complex: ComplexValue
    as_nested_tensors: List[List[TensorArgument]]
    as_int_lists: List[List[int]]
    as_string_to_argument: Dict[str, Argument]
    as_float_lists: List[List[float]]


@union
class ConstantValue(Union):
    as_none: bool
    as_int: int
    as_float: float
    as_string: str
    as_bool: bool


@struct
class NamedArgument:
    # Argument name from the op schema; positional or keyword as the call site passed it.
    name: str
    arg: Argument
    kind: Optional[ArgumentKind] = None


# ---------------------------------------------------------------------------- graph


@struct
class Node:
    target: str
    inputs: List[NamedArgument]
    outputs: List[Argument]
    metadata: Dict[str, str]
    is_hop_single_tensor_return: Optional[bool] = None
    name: Optional[str] = None


@struct
class Graph:
    inputs: List[Argument]
    outputs: List[Argument]
    nodes: List[Node]
    tensor_values: Dict[str, TensorMeta]
    sym_int_values: Dict[str, SymInt]
    sym_bool_values: Dict[str, SymBool]
    # True when the graph returns a single tensor rather than a tuple of one.
    is_single_tensor_return: bool = False
    custom_obj_values: Dict[str, CustomObjArgument] = field(default_factory=dict)
    sym_float_values: Dict[str, SymFloat] = field(default_factory=dict)


# ------------------------------------------------------------------------ signature


@struct
class UserInputSpec:
    # Only TensorArgument, SymIntArgument, ConstantArgument and CustomObjArgument occur.
    arg: Argument


@struct
class InputToParameterSpec:
    arg: TensorArgument
    parameter_name: str


@struct
class InputToBufferSpec:
    arg: TensorArgument
    buffer_name: str
    persistent: bool


@struct
class InputToTensorConstantSpec:
    arg: TensorArgument
    tensor_constant_name: str


@struct
class InputToCustomObjSpec:
    arg: CustomObjArgument
    custom_obj_name: str


@struct
class InputTokenSpec:
    arg: TokenArgument


@struct
class InputToConstantInputSpec:
    name: str
    value: ConstantValue


@union
class InputSpec(Union):
    user_input: UserInputSpec
    parameter: InputToParameterSpec
    buffer: InputToBufferSpec
    tensor_constant: InputToTensorConstantSpec
    custom_obj: InputToCustomObjSpec
    token: InputTokenSpec
    constant_input: InputToConstantInputSpec


@struct
class UserOutputSpec:
    arg: Argument


@struct
class LossOutputSpec:
    arg: TensorArgument


@struct
class BufferMutationSpec:
    arg: TensorArgument
    buffer_name: str


@struct
class ParameterMutationSpec:
    arg: TensorArgument
    parameter_name: str


@struct
class GradientToParameterSpec:
    arg: TensorArgument
    parameter_name: str


@struct
class GradientToUserInputSpec:
    arg: TensorArgument
    user_input_name: str


@struct
class UserInputMutationSpec:
    arg: TensorArgument
    user_input_name: str


@struct
class OutputTokenSpec:
    arg: TokenArgument


@union
class OutputSpec(Union):
    user_output: UserOutputSpec
    loss_output: LossOutputSpec
    buffer_mutation: BufferMutationSpec
    gradient_to_parameter: GradientToParameterSpec
    gradient_to_user_input: GradientToUserInputSpec
    user_input_mutation: UserInputMutationSpec
    token: OutputTokenSpec
    parameter_mutation: ParameterMutationSpec


@struct
class GraphSignature:
    input_specs: List[InputSpec]
    output_specs: List[OutputSpec]


# --------------------------------------------------------------- module call graph


@struct
class RangeConstraint:
    # None means unbounded on that side (torch writes -oo/oo as null).
    min_val: Optional[int]
    max_val: Optional[int]


@struct
class ModuleCallSignature:
    inputs: List[Argument]
    outputs: List[Argument]
    # Pytree specs (torch's treespec JSON, itself a JSON string).
    in_spec: str
    out_spec: str
    forward_arg_names: Optional[List[str]] = None


@struct
class ModuleCallEntry:
    fqn: str
    signature: Optional[ModuleCallSignature] = None


@struct
class NamedTupleDef:
    field_names: List[str]


# --------------------------------------------------------------------- the program


@struct
class GraphModule:
    graph: Graph
    signature: GraphSignature
    module_call_graph: List[ModuleCallEntry]
    metadata: Dict[str, str] = field(default_factory=dict)
    treespec_namedtuple_fields: Dict[str, NamedTupleDef] = field(default_factory=dict)


@struct
class SchemaVersion:
    major: int
    minor: int


@struct
class ExportedProgram:
    graph_module: GraphModule
    opset_version: Dict[str, int]
    range_constraints: Dict[str, RangeConstraint]
    schema_version: SchemaVersion
    verifiers: List[str] = field(default_factory=list)
    torch_version: str = "<=2.4"
    guards_code: List[str] = field(default_factory=list)


# ------------------------------------------------------------ archive payload configs


@struct
class PayloadMeta:
    # Member name under data/weights/ or data/constants/; several entries may share one.
    path_name: str
    is_param: bool
    use_pickle: bool
    tensor_meta: Optional[TensorMeta]


@struct
class PayloadConfig:
    config: Dict[str, PayloadMeta]


# ------------------------------------------------------------ AOTInductor (listed only)


@struct
class AOTInductorModelPickleData:
    library_basename: str
    input_names: List[str]
    output_names: List[str]
    floating_point_input_dtype: Optional[int] = None
    floating_point_output_dtype: Optional[int] = None
    aot_inductor_model_is_cpu: Optional[bool] = None


@struct
class ExternKernelNode:
    name: str
    node: Node


@struct
class ExternKernelNodes:
    nodes: List[ExternKernelNode]
