"""Executors that run the traces of a batch somewhere other than this process's event loop.

The local executor is `car.batch.blame_many_async`. `car.executors.ray` runs each trace as a Ray task
(optional extra: `pip install 'car-blame[ray]'`).
"""
