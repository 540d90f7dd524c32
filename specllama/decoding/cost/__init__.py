"""What speculation costs on this machine: the cost model (model.py), the costs learnt from the
engine's own steps (online.py), the optional startup microbenchmark used only as a prior (curve.py)
and the cache of both per machine, models and threads (cache.py)."""
