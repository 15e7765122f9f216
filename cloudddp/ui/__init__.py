"""`cloudddp ui`: a local dashboard of the indexed jobs and their training curves (server.py, static/)."""
