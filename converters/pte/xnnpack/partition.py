"""The partitioner: which calls of the plan XNNPACK runs, grouped into the largest connected
groups that can each run as one delegate call.

The calls are visited in the plan's order (a topological one). A call XNNPACK takes joins the
group of one of its producers, merging the groups of its other producers into it when that is
possible, or starts a group; any other call is a node of its own. The condensed graph (groups
and portable calls as nodes) must stay acyclic, which is what lets every group run as one
instruction: a call joins (and groups merge) only where no path leaves the group and comes back.
For that, each node keeps the groups it is reached from (``reached_from``) and each group the
nodes it reaches (``reaches``).
"""

from __future__ import annotations

from .index import PlanIndex

__all__ = ["partition"]


class _Condensed:
    def __init__(self):
        self.node_of: dict = {}  # id(call) -> node id
        self.is_group: set = set()
        self.members: dict = {}  # group node -> its calls, in order
        self.reached_from: dict = {}  # node -> the groups with a path to it
        self.reaches: dict = {}  # group node -> the nodes it has a path to
        self._next = 0

    def new_node(self, group: bool) -> int:
        n, self._next = self._next, self._next + 1
        self.reached_from[n] = set()
        if group:
            self.is_group.add(n)
            self.members[n] = []
            self.reaches[n] = set()
        return n

    def reaches_node(self, g: int, n: int) -> bool:
        return g in self.reached_from[n]

    def add_edge(self, x: int, y: int) -> None:
        """x -> y: every group reaching x (and x, a group) now reaches y and what y reaches."""
        if x == y:
            return
        sources = set(self.reached_from[x]) | ({x} if x in self.is_group else set())
        targets = {y} | self.reaches.get(y, set())
        for t in targets:
            self.reached_from[t] |= sources
        for s in sources:
            self.reaches[s] |= targets

    def merge(self, g: int, h: int) -> None:
        """Group h becomes part of group g (neither reaches the other)."""
        self.members[g].extend(self.members.pop(h))
        for c_id, n in self.node_of.items():
            if n == h:
                self.node_of[c_id] = g
        self.is_group.discard(h)
        self.reaches[g] |= self.reaches.pop(h)
        self.reached_from[g] |= self.reached_from.pop(h)
        for sets in (self.reached_from, self.reaches):
            for s in sets.values():
                if h in s:
                    s.discard(h)
                    s.add(g)
        self.reached_from[g].discard(g)
        self.reaches[g].discard(g)


def partition(index: PlanIndex, takes) -> list[list]:
    """The groups (each a list of calls in plan order) of the calls ``takes(call)`` accepts."""
    cg = _Condensed()
    order = {id(c): i for i, c in enumerate(index.plan.calls)}
    for c in index.plan.calls:
        preds = list(dict.fromkeys(cg.node_of[id(p)] for p in index.producers(c) if id(p) in cg.node_of))
        node = None
        if takes(c):
            groups = sorted((p for p in preds if p in cg.is_group), key=lambda g: -len(cg.members[g]))
            # a group can take c when it reaches none of c's other producers; those groups reach
            # neither each other, so they merge into one
            joinable = [g for g in groups if all(not cg.reaches_node(g, x) for x in preds if x != g)]
            if joinable:
                node = joinable[0]
                for h in joinable[1:]:
                    cg.merge(node, h)
                preds = list(dict.fromkeys(node if p in joinable else p for p in preds))
            else:
                node = cg.new_node(group=True)
            cg.members[node].append(c)
        else:
            node = cg.new_node(group=False)
        cg.node_of[id(c)] = node
        for x in preds:
            cg.add_edge(x, node)
    return [sorted(m, key=lambda c: order[id(c)]) for m in cg.members.values() if m]
