"""What one run is: its config, its workload and its results (pure values, no simulation), and
the content-addressed cache of those results (:mod:`.cache`)."""
