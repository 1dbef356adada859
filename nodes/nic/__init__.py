"""The NIC: the collective-offload engine of spec 01 (triggered descriptors) and its ALU."""
