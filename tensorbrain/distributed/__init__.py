"""tensorbrain.distributed (placeholder; the process-group API is added by its own change)."""
