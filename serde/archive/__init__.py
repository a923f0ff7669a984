"""The archive layer: .pt2 zip files in and out, and the tensor bytes inside them.

``zip_reader`` (checked, zero-copy access to members), ``loader`` (``load``: the layouts torch
2.6-2.7, 2.8-2.9 and 2.10+ wrote, to models with numpy weights), ``payload`` (the 2.10+ weight
configs and raw storages), ``tensor_data`` (tensor bytes to numpy views, after checking they
fit), ``package`` (schema programs and payloads to members in torch's PT2 layout),
``legacy_layout`` (the layouts torch 2.6-2.8 read: pickled weights, the flat zip) with
``torch_save`` (the records of a ``torch.save`` file of tensors) and ``zip_writer``
(deterministic, aligned, atomic), and ``aoti`` (AOTInductor packages: member names and
metadata, never loaded). Torch-free.
"""
