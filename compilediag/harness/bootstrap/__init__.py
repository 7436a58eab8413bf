"""What `compilediag run` puts on a job's path (sitecustomize.py) and the probe it loads
(_compilediag_runtime.py). Both use the standard library only: the job's Python need not
have compilediag installed."""
