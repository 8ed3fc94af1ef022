"""car's validation and benchmark suite: planted-truth models, car's estimators, the paper's baselines.

Run `python -m bench --quick` (CI, about a minute) or `python -m bench` (the full suite); see
docs/validation.md for what each model tests and how to read bench/RESULTS.md.
"""
