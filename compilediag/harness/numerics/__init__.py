"""Compiled against eager, in the worker, where the run compares outputs: a float64
reference says which of the two is the nearer and how far compiled may stand (closeness);
random ops are named and compared again with torch's own random numbers (reference); a
difference that remains is searched for (search): the first graph and backend stage that
show it, the first op that departs while its inputs agree, the first NaN or inf, torch's
opcheck on the custom ops; and a repro that runs alone is written (repro). The search
runs only where a difference is seen. torch is passed in, never imported."""
