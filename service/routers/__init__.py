"""One router per resource: graphs, queries on a graph, health and metrics."""
