"""Batched bitmask search on the GPU for the pairs the label filter could not decide.

One pass runs up to 64 x W searches at once: every node carries W status words, bit j of word w
meaning "search 64*w + j has reached this node", a summary with one bit per non-zero word, and a flag
saying that some search reached it. The pass sweeps the DAG's topological levels once, from the
lowest source level up to the highest target level of the searches its seed step leaves open: a
node's bits are all in when its level comes (every parent has a lower level), so each reached node
is expanded once per pass, whatever the number of searches through it. Per level, the frontier
engine's balanced fill walks the level's nodes and turns each non-zero summary word of a reached
node into a *chunk*, whose work items are its status words x the node's out-edges; the balanced
advance then gives every thread an equal share of the level's items, neighbouring threads taking
neighbouring edges of one status word. Per item and per live bit (a search not yet found) the child
gets the CPU search's test (``grail_core.query.classify``, on the same 64-byte node records): prune
on level, topological id, GRAIL intervals and hub bits; answer on the target itself, a DFS-tree
interval or a hub between. A search whose target was found is masked out of every later expansion.
Marking a child takes two atomics whose results nobody waits for and one plain store: no round trip
to memory and no counter shared by the threads.

A pass first copies its searches' target records into one small table, so that its tests read
targets from the L2 cache instead of one random record of the whole graph per test. All passes of a
call run in one persistent launch, so a call costs one launch and one read of the found bits. A
level whose chunks outgrow the chunk arrays ends the launch, and the call starts again with half the
searches a pass (at 64 searches or fewer a pass a node has one summary word, so a level has at most
as many chunks as nodes, which the arrays hold). Device copies of the index are cached per
``HotArrays`` between calls; an index makes its copy in the background when it is built or loaded
(``CudaSearchEngine.prefetch``), on the device (a stable sort by level and gathers).

Passes that span many levels run hop by hop instead (*frontier mode*): a queue of (node, status word,
new bits) entries per hop, one grid barrier a hop, so a pass costs as many rounds as its longest search
takes hops, not as many as the levels it spans (on a DAG of 340,000 levels, about a thousand at most).

Modules: ``ops`` (the per-item device functions), ``driver`` (the persistent kernels and their launch),
``device_index`` (the level-order device copy, the per-device cache of several indexes, the workspace),
``host`` (options, mode choice, one call on a device), ``engine`` (``CudaSearchEngine``), ``touched`` (the
search on a version's updated graph, for the pairs edge updates leave to one: ``answer_touched``).
"""

from .device_index import chunk_capacity, entry_capacity
from .engine import CudaSearchEngine, search_pairs, search_pairs_with_stats
from .host import FRONTIER_SPAN, MODES, SearchOptions, SearchStats, choose_mode, words_for

__all__ = [
    "FRONTIER_SPAN",
    "MODES",
    "CudaSearchEngine",
    "SearchOptions",
    "SearchStats",
    "choose_mode",
    "chunk_capacity",
    "entry_capacity",
    "search_pairs",
    "search_pairs_with_stats",
    "words_for",
]
