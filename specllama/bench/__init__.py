"""`specllama bench`: a fair with/without-draft benchmark on the user's own machine.

configs.py parses "--configs"; runner.py runs them interleaved; exactness.py checks greedy outputs
against plain decoding; aggregate.py turns runs into per-prompt results and per-config summaries;
report.py prints and writes them; benchmark.py ties these together. The cost curve lives in
specllama/cost_curve.py because choosing K automatically needs it too.
"""
