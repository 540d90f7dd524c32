"""What speculation costs on this machine: the cost model (model.py), the costs learnt from the
engine's own steps (online.py) and the optional startup microbenchmark used only as a prior (curve.py);
both are kept per machine, models and threads in runtime/cost_store.py."""
