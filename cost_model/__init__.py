"""Pure cost math of TR-Spark (§4): lifetimes, cascading recomputation, backup costs. No Spark, no I/O.

The lifetime models are in :mod:`cost_model.lifetimes`, the costs in the modules beside it.
"""
