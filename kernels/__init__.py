"""GPU side of grail (numba-cuda): one frontier engine, the five-phase labeling and the bitmask search.

Modules import ``numba.cuda`` lazily where they can, so that importing ``kernels`` never needs a GPU.
"""
