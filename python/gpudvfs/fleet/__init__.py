"""Fleet scale on Ray: per-GPU calibration into a registry, drift checks, cluster power budgets, what-ifs."""
