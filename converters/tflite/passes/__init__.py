"""The TFLite target's passes over written subgraphs, one file per pass, named after its entry
(``pipeline.py`` runs them in order and says why each stands where it does): ``optimize_layout``
(NCHW -> NHWC), ``merge_and_prune``, ``fold_biases``, ``fuse_activations``, ``fold_affine``,
``transposes_into_adj_y``, ``drop_squeezing_reshapes`` and ``hoist_input_only``."""
