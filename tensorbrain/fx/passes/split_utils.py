"""``torch.fx.passes.split_utils``: :func:`split_by_tags`, torch's split of a GraphModule into
one submodule per tag (each node carries ``node.tag``), called in tag order from a new top
graph; the values each submodule needs from earlier ones become its inputs, the ones later
parts (or the output) need become its outputs.

>>> import tensorbrain as tb
>>> from tensorbrain.fx.passes.split_utils import split_by_tags
>>> gm = tb.fx.symbolic_trace(tb.nn.Sequential(tb.nn.Linear(2, 2), tb.nn.ReLU()))
>>> for node in gm.graph.nodes:
...     node.tag = "first" if node.name == "_0" else "second"
>>> [name for name, _ in split_by_tags(gm, ["first", "second"]).named_children()]
['first', 'second']
"""
from __future__ import annotations

import copy
import operator
from dataclasses import dataclass, field
from typing import Any

from ...nn.modules.module import Module
from ..graph import Graph
from ..graph_module import GraphModule
from ..node import Node, map_arg

__all__ = ["Component", "split_by_tags"]


@dataclass
class Component:
    """One tag's part: its graph, its position and the values crossing its border."""
    graph: Graph
    order: int
    name: str
    input_placeholders: list = field(default_factory=list)
    orig_inputs: list = field(default_factory=list)
    orig_outputs: list = field(default_factory=list)
    getattr_maps: dict = field(default_factory=dict)
    constructor_args: list = field(default_factory=list)
    gm: Any = None


class HolderModule(Module):
    """A module holding the given children (torch's ``HolderModule``).

    Args:
        d: name -> module.
    """

    def __init__(self, d: dict):
        super().__init__()
        for k, v in d.items():
            self.add_module(k, v)


def _flatten(x) -> list:
    out: list = []
    map_arg(x, out.append)
    return out


def _lift(gm, subgraph: Graph, comp_name: str) -> tuple[GraphModule, dict]:
    """A GraphModule of ``subgraph`` holding the submodules and attributes it names."""
    root = HolderModule({})
    mapping = {}
    for n in subgraph.nodes:
        if n.op not in ("call_module", "get_attr"):
            continue
        *path, leaf = n.target.split(".")
        cur, orig = root, gm
        for name in path:
            if not hasattr(cur, name):
                cur.add_module(name, HolderModule({}))
            cur, orig = getattr(cur, name), getattr(orig, name)
        mapping[n.target] = f"{comp_name}.{n.target}"
        setattr(cur, leaf, getattr(orig, leaf))
    return GraphModule(root, subgraph), mapping


def split_by_tags(gm, tags: list, return_fqn_mapping: bool = False, return_tuple: bool = False,
                  GraphModuleCls: type = GraphModule):   # noqa: N803  (torch's name)
    """Split ``gm`` into one submodule per tag, as torch's ``split_by_tags``.

    Args:
        gm: a GraphModule whose non-placeholder, non-get_attr nodes each have ``.tag``.
        tags: the tags in execution order (a part may only use values of earlier parts).
        return_fqn_mapping: also return ``{original name: name in the split module}``.
        return_tuple: every part returns a tuple (even of one value).
        GraphModuleCls: the class of the result.

    Returns:
        The split GraphModule (submodules named by tag), and the mapping when asked.

    Raises:
        AssertionError: a node without a tag, or a part using a later part's value.
        RuntimeError: no output node, or several.
    """
    remap: dict[Node, Node] = {}
    node_comp: dict[Node, Component] = {}
    by_tag: dict[str, Component] = {}
    comps: list[Component] = []
    used_in_main: dict[Node, None] = {}
    main_g = Graph()
    main_remap: dict[Node, Node] = {}
    output_node = None
    for tag in tags:
        comp = Component(Graph(), len(comps), f"{tag}")
        comps.append(comp)
        by_tag[tag] = comp
    for node in gm.graph.nodes:
        if node.op == "output":
            if output_node is not None:
                raise RuntimeError("Multiple output nodes in graph!")
            output_node = node
            continue
        if node.op == "placeholder":
            main_remap[node] = main_g.placeholder(node.name, type_expr=node.type)
            main_remap[node].meta = copy.copy(node.meta)
            continue
        if node.op == "get_attr":
            continue
        if not hasattr(node, "tag"):
            raise AssertionError(f"Node does not have tag: {node.format_node()}")
        upstream = [node_comp[x] for x in _flatten(node.args) + _flatten(node.kwargs)
                    if x.op not in ("placeholder", "get_attr")]
        comp = by_tag[node.tag]
        node_comp[node] = comp
        mx = max((c.order for c in upstream), default=0)
        if comp.order < mx:
            raise AssertionError(f"Component {comp.name} order must be >= max of its upstream "
                                 f"components, order={comp.order} and max={mx}")

        def remap_func(x: Node, comp: Component = comp) -> Node:
            if x.op == "get_attr":
                if x not in comp.getattr_maps:
                    comp.getattr_maps[x] = comp.graph.get_attr(x.target, type_expr=x.type)
                    comp.getattr_maps[x].meta = copy.copy(x.meta)
                return comp.getattr_maps[x]
            if x.op != "placeholder" and node_comp[x] is comp:
                return remap[x]
            if x not in comp.orig_inputs:
                comp.orig_inputs.append(x)
                ph = comp.graph.placeholder(x.name, type_expr=x.type)
                ph.meta = copy.copy(x.meta)
                comp.input_placeholders.append(ph)
                used_in_main[x] = None
            return comp.input_placeholders[comp.orig_inputs.index(x)]
        n = comp.graph.node_copy(node, remap_func)
        n.tag = node.tag  # type: ignore[attr-defined]
        remap[node] = n
        node_comp[n] = comp
    if output_node is None:
        raise RuntimeError("Graph had no output node!")
    for x in _flatten(output_node.args[0]):
        if x.op == "get_attr":
            main_remap[x] = main_g.get_attr(x.name, type_expr=x.type)
        else:
            used_in_main[x] = None
    for n in used_in_main:
        if n.op != "placeholder":
            node_comp[n].orig_outputs.append(n)
    fqn_mapping: dict[str, str] = {}
    for comp in comps:
        outs = tuple(remap[o] for o in comp.orig_outputs)
        comp.graph.output(outs if return_tuple or len(outs) != 1 else outs[0])
        comp.gm, mapping = _lift(gm, comp.graph, comp.name)
        fqn_mapping.update(mapping)
        call = main_g.call_module(comp.name, args=tuple(main_remap[i] for i in comp.orig_inputs))
        if len(outs) == 1 and not return_tuple:
            main_remap[comp.orig_outputs[0]] = call
        else:
            for i, o in enumerate(comp.orig_outputs):
                main_remap[o] = main_g.call_function(operator.getitem, (call, i))
    main_g.output(map_arg(output_node.args[0], main_remap.__getitem__))
    main_root = HolderModule({comp.name: comp.gm for comp in comps})
    main_g._codegen = gm.graph._codegen
    for x in _flatten(output_node.args[0]):
        if x.op == "get_attr":
            obj = gm
            for part in x.target.split("."):
                obj = getattr(obj, part)
            setattr(main_root, x.name, obj)
    result = GraphModuleCls(main_root, main_g)
    return (result, fqn_mapping) if return_fqn_mapping else result
