"""What one run is: its config, its workload and its results (pure values, no simulation)."""
