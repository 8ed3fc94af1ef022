"""Estimators: pure functions of rollout outcomes (`plan`, then `estimate`).

They see arrays of outcomes indexed by arm and replicate, never traces, policies or HTTP.
"""
