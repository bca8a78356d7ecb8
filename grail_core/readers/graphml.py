"""GraphML (``networkx.write_graphml``, yEd, Gephi, igraph), streamed.

Nodes are the ``<node id=...>`` elements (isolated ones too) and the ends of the ``<edge source= target=>``
elements. Edges are directed unless the file says otherwise: ``edgedefault="undirected"`` on the graph, or
``directed="false"`` on an edge, makes an edge run both ways. Data (``<data>``, ``<key>``) is ignored. Node
ids are names: integers where every id is one (as in edge lists), strings otherwise.

The document streams through ``xml.etree.ElementTree.iterparse`` (expat), its elements dropped once read:
memory holds a batch of names, not the document. A DTD is refused (GraphML needs none, and entities are how
a small XML file expands into a huge one); so are hyperedges, nested graphs and files of several graphs.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from typing import Any

from ..errors import GraphFormatError
from ..formats import ReadOptions
from ..names import MAX_NAME_BYTES, NameTokens
from .edgelist import SNIFF_BYTES
from .graph_input import GraphInput
from .sink import EdgeSink
from .source import InputSource

__all__ = ["read_graphml", "read"]

# Names handed to the sink at a time.
BATCH = 1 << 16
_ROOT = re.compile(rb"<(?:[\w.-]+:)?graphml\b")


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


class _Batch:
    """Names read since the last hand-over to the sink."""

    def __init__(self, sink: EdgeSink) -> None:
        self.sink = sink
        self.nodes: list[str] = []
        self.directed: tuple[list[str], list[str]] = ([], [])
        self.undirected: tuple[list[str], list[str]] = ([], [])

    def __len__(self) -> int:
        return len(self.nodes) + len(self.directed[0]) + len(self.undirected[0])

    def flush(self) -> None:
        if self.nodes:
            self.sink.add_nodes(NameTokens.from_strings(self.nodes))
        for ends, both_ways in ((self.directed, False), (self.undirected, True)):
            if ends[0]:
                sources, targets = (NameTokens.from_strings(names) for names in ends)
                self.sink.add_edges(sources, targets, both_ways=both_ways)
        self.nodes, self.directed, self.undirected = [], ([], []), ([], [])


def _attribute(element: Any, name: str, what: str) -> str:
    value = element.get(name)
    if value is None:
        raise GraphFormatError(f"a GraphML {what} without its {name!r} attribute")
    return str(value)


def read_graphml(source: InputSource, max_name_bytes: int = MAX_NAME_BYTES) -> GraphInput:
    head, _ = source.head(SNIFF_BYTES)
    root = _ROOT.search(head)
    prolog = head[: root.start()] if root else head
    if b"<!DOCTYPE" in prolog or b"<!ENTITY" in prolog:
        raise GraphFormatError("a GraphML file with a DTD (<!DOCTYPE ...>) is refused: GraphML needs none")
    if root is None:
        raise GraphFormatError(f"no <graphml> element in the first {SNIFF_BYTES >> 10} KiB")
    sink = EdgeSink(max_name_bytes)
    batch = _Batch(sink)
    graphs = 0
    default_directed = True
    graph_element: Any = None
    with source.open() as stream:
        events = ElementTree.iterparse(stream, events=("start", "end"))
        try:
            for event, element in events:
                tag = _local(element.tag)
                if event == "start":
                    if tag == "graph":
                        graphs += 1
                        if graphs > 1:
                            raise GraphFormatError("the file holds more than one graph (or a nested one): upload one")
                        default_directed = element.get("edgedefault", "directed") != "undirected"
                        graph_element = element
                    elif tag == "hyperedge":
                        raise GraphFormatError("hyperedges are not read: a reachability graph has edges")
                    continue
                if tag == "node":
                    batch.nodes.append(_attribute(element, "id", "node"))
                elif tag == "edge":
                    directed = element.get("directed")
                    one_way = directed == "true" if directed else default_directed
                    ends = batch.directed if one_way else batch.undirected
                    ends[0].append(_attribute(element, "source", "edge"))
                    ends[1].append(_attribute(element, "target", "edge"))
                else:
                    continue
                element.clear()
                if len(batch) >= BATCH:
                    batch.flush()
                    if graph_element is not None:
                        graph_element.clear()  # drop the elements read (cleared, but still its children)
        except ElementTree.ParseError as error:
            raise GraphFormatError(f"malformed GraphML: {error}", line=error.position[0]) from None
    if graphs == 0:
        raise GraphFormatError("no <graph> element in the GraphML file")
    batch.flush()
    return sink.finish("graphml")


def read(source: InputSource, options: ReadOptions, max_name_bytes: int) -> GraphInput:
    """The format table's reader (``grail_core.formats``)."""
    return read_graphml(source, max_name_bytes)
