"""int8 and stored-weight quantization for the TFLite target. ``qdq_pass`` installs the plan
(``qdq_plan`` finds the DequantizeLinear -> op -> QuantizeLinear patterns, with ``qdq_params``'
parameters) whose kernels ``qdq_conv``, ``qdq_elementwise`` and ``qdq_movement`` emit, registered
in ``qdq_registry``; ``weight_storage`` writes the weight-only options (float16 or int8 weights,
``to_tflite(weights=)``)."""
