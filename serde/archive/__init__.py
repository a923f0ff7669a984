"""Archive layer: the checked zip reader and writer, the layouts of each torch release, tensor data."""
