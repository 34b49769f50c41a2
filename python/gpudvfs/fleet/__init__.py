"""Fleet scale: cluster power budgets (`budget`)."""
