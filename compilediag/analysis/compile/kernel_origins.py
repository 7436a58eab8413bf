"""Where a kernel's work comes from: the Dynamo graph's nodes (each with the user's line
and the submodule whose state it uses), the ops a fused kernel's name holds, a library
call's op, and Inductor's provenance records (a kernel's nodes, its stack traces); and the
user lines of a kernel that none of them names, matched from its ops. `kernels.py` reads
the kernels themselves from the wrapper and asks this module whose lines they are."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from compilediag.paths import Owner, is_library_file, owner_of
from compilediag.trace.compiles import Compile
from compilediag.trace.formats import (
    FUSED_INFIX,
    GRAPH_ATEN_ALIASES,
    GRAPH_COMMON_OPS,
    GRAPH_FILE_COMMENT,
    GRAPH_INPUT,
    GRAPH_LAYOUT_OPS,
    GRAPH_LIBRARY_OPS,
    GRAPH_MODULE_SEP,
    GRAPH_MODULE_STATE,
    GRAPH_NODE_ASSIGN,
    GRAPH_NODE_CALL,
    GRAPH_NODE_OPERATOR,
    GRAPH_OPERATORS,
    KERNEL_SUFFIX,
    OP_TARGET,
    PROVENANCE_KERNEL_TO_POST,
    PROVENANCE_NODE_MAPPINGS,
    PROVENANCE_POST_TO_PRE,
    STACK_FILE_LINE,
)


def _assignments(graph_code: str) -> Iterator[tuple[re.Match[str], str, str]]:
    """Each node assignment of a Dynamo graph under a `# File:` comment: the match, the
    user's `file:line` it came from, and the graph's line itself."""
    current = ""
    for line in graph_code.splitlines():
        m = GRAPH_FILE_COMMENT.match(line)
        if m:
            current = f"{m['file']}:{m['line']}"
        elif current and (a := GRAPH_NODE_ASSIGN.match(line)):
            yield a, current, line


def node_lines(graph_code: str) -> dict[str, str]:
    """FX node name -> `file:line` of the user code that produced it."""
    out: dict[str, str] = {}
    for a, place, _ in _assignments(graph_code):
        for name in a["names"].split(","):
            out.setdefault(name.strip(), place)
    return out


@dataclass(frozen=True)
class GraphNode:
    """A Dynamo graph node: what it computes (`relu`, `mul`, `linear`) and its user line."""

    name: str
    op: str
    line: str


def graph_nodes(graph_code: str) -> list[GraphNode]:
    """The Dynamo graph's computing nodes in order, each with the user line it came from
    (a node whose line is torch's own - the inside of a functional collective - names no
    line of the user's, and is left out); an AOT graph's alike, each node its ATen op."""
    out: list[GraphNode] = []
    for a, place, line in _assignments(graph_code):
        if owner_of(place.rpartition(":")[0]) == Owner.TORCH:
            continue
        aten = OP_TARGET.search(line)  # (an AOT graph's node: `torch.ops.aten.div.Tensor(`)
        call, operator = GRAPH_NODE_CALL.search(line), GRAPH_NODE_OPERATOR.search(line)
        op = (
            aten[1] if aten else call["fn"] if call
            else GRAPH_OPERATORS[operator["op"]] if operator else ""
        )  # fmt: skip
        if op:
            out.append(GraphNode(a["names"].split(",")[0].strip(), _op_word(op), place))
    return out


def _op_word(name: str) -> str:
    """`aten._softmax`, `softmax`, `add_` and `native_layer_norm` as one word each; a
    backward op as its forward (`_softmax_backward_data`, `nll_loss_forward`)."""
    name = name.rpartition(".")[2].strip("_").removeprefix("native_")
    for suffix in ("_backward_data", "_backward", "_forward"):
        name = name.removesuffix(suffix)
    return name


def lines_from_ops(
    ops: list[str], nodes: list[GraphNode], claimed: set[str], backward: bool = False
) -> list[str]:
    """A generated kernel's user lines where Inductor recorded none (no provenance, and a
    C++ kernel's call has no source-node comment), from the ops its name holds: for each,
    the first Dynamo graph node that computes it and that no earlier kernel of the same
    wrapper took. A backward wrapper runs the graph in reverse, but its kernels follow the
    forward's order less closely: there, only an op that one line alone computes counts
    (`gelu`, not one of nine `linear`s). Layout ops are no evidence; ops any line may hold
    (add, mul, sum...) count in a forward kernel where one line alone computes them, else
    only for a kernel whose other ops place nothing. A line that can't be told is left out
    (tests: every matched line is one Inductor's provenance records give, where they exist)."""
    order = nodes[::-1] if backward else nodes
    whole = [op for op in ops if not op.endswith("_")]  # `aten.softmax_`: a split gone wrong
    words = [w for w in dict.fromkeys(map(_op_word, whole)) if w and w not in GRAPH_LAYOUT_OPS]
    if backward:  # its kernels' order follows the forward's less closely: one line or none
        words = [w for w in words if _one_line(w, order)]
    telling = [w for w in words if w not in GRAPH_COMMON_OPS]
    if not backward:  # a common op one line alone computes (`any` of a layer norm's kernel)
        telling += [w for w in words if w in GRAPH_COMMON_OPS and _one_line(w, order)]
    lines = _claim(telling, order, claimed)
    if not lines:
        return _claim(words, order, claimed)
    # its common ops on the lines it was placed at are its own there: a later kernel's
    # `add` is not the RMSNorm's `var + eps` this one fused (a look read the residual
    # add's kernel at the norm's line)
    for word in words:
        if word not in telling:
            _claim_on(word, lines, order, claimed)
    return lines


def _claim_on(word: str, lines: list[str], order: list[GraphNode], claimed: set[str]) -> None:
    """The first node not yet taken that computes `word` on one of `lines`, taken."""
    accepted = _accepted(word)
    node = next(
        (n for n in order if n.op in accepted and n.line in lines and n.name not in claimed), None
    )
    if node is not None:
        claimed.add(node.name)


@dataclass
class AotFlow:
    """The AOT graph's data flow: its computing nodes (graph_nodes), the positions of the
    nodes that take each graph input (`arg3_1`, `primals_3`: a layer's weight, its running
    stats, the model's input), and of those that take each node's output."""

    nodes: list[GraphNode]
    at: dict[str, int] = field(default_factory=dict)  # a node's name -> its position
    users: dict[str, list[int]] = field(default_factory=dict)
    consumers: dict[int, list[int]] = field(default_factory=dict)


def aot_flow(aot_code: str, aten: list[GraphNode]) -> AotFlow:
    at = {n.name: i for i, n in enumerate(aten)}
    flow = AotFlow(aten, at)
    for a, _, line in _assignments(aot_code):
        i = at.get(a["names"].split(",")[0].strip())
        if i is None:
            continue
        # the call's arguments (not its op's name, `aten.add`, nor `;  x = None`, a free)
        args = line.partition("=")[2].split(";")[0].partition("(")[2]
        for name in dict.fromkeys(GRAPH_INPUT.findall(args)):
            flow.users.setdefault(name, []).append(i)
        for name in dict.fromkeys(re.findall(r"\b\w+\b", args)):
            j = at.get(name)
            if j is not None and j != i:
                flow.consumers.setdefault(j, []).append(i)
    return flow


def lines_from_inputs(
    ops: list[str], inputs: list[str], flow: AotFlow, made_by: list[str], dynamo: AotFlow
) -> list[str]:
    """A generated kernel's lines from what its call reads (a C++ kernel's call names no
    nodes). The AOT graph nodes that take a graph input it reads, where all of the input's
    are on one line, are its own (a batch norm's, whose running stats it reads; a
    convolution's, whose weight a layout kernel reorders); a buffer a library call made
    (`made_by`: that call's Dynamo graph nodes) starts its work after that call's node. From
    there its work flows on through the nodes that take their outputs, on its lines or
    computing an op its name holds, as far as a library call (the next convolution) or a
    node of another op on another line (the next block's shortcut pool, for a kernel of no
    pool): in the AOT graph from its inputs, in Dynamo's (whose ops are not decomposed: a
    silu, not its sigmoid) from a library call's output. None where it reads neither
    (tests: each line one Inductor's provenance records give, where they exist; a look's
    timm resnet18 on 2.15: 12 of 16 kernels wrong by ops alone, none so)."""
    aten = flow.nodes
    # an input taken on several lines (the model's input: a norm's and the residual add's)
    # does not tell which is the kernel's
    told = [flow.users.get(name, []) for name in inputs]
    own = {i for taken in told if len({aten[j].line for j in taken}) == 1 for i in taken}
    words = {_op_word(op) for op in ops} - GRAPH_LAYOUT_OPS
    accepted = {a for w in words for a in _accepted(w)}
    lines = {aten[i].line for i in own}
    # (a layout kernel's nodes are library calls', whose outputs are no work of its)
    region = _spread(flow, own, [i for i in own if aten[i].op not in GRAPH_LIBRARY_OPS],
                     lines, accepted)  # fmt: skip
    made = [dynamo.at[name] for name in made_by if name in dynamo.at]
    more = _spread(dynamo, set(), made, lines, accepted)
    placed = [(i, aten[i].line) for i in region] + [(i, dynamo.nodes[i].line) for i in more]
    return list(dict.fromkeys(line for _, line in sorted(placed)))


def _spread(
    flow: AotFlow, region: set[int], start: list[int], lines: set[str], accepted: set[str]
) -> set[int]:
    """`region` grown from the nodes at `start` through the nodes that take their outputs:
    those on `lines` (which it adds to) or computing an op of `accepted`, up to a library
    call."""
    stack, seen = list(start), set(start)
    while stack:
        for j in flow.consumers.get(stack.pop(), []):
            n = flow.nodes[j]
            if j in region or j in seen or n.op in GRAPH_LIBRARY_OPS:
                continue
            if n.line not in lines and n.op not in accepted:
                continue
            region.add(j)
            lines.add(n.line)
            stack.append(j)
    return region


def unplaced(ops: list[str], nodes: list[GraphNode], placed: bool = False) -> list[str]:
    """The ops no node of `nodes` computes, by any name (F.normalize's clamp_min and div,
    where the Dynamo graph holds `normalize`): for the AOT graph's nodes to place. Where
    the kernel's other ops `placed` it, an op any line may hold says nothing and is left
    out (a look's resnet: its residual `add` given the stem's batch norm's `var + eps`)."""
    return [
        op for op in ops
        if not any(n.op in _accepted(_op_word(op)) for n in nodes)
        and not (placed and _op_word(op) in GRAPH_COMMON_OPS)
    ]  # fmt: skip


def _one_line(word: str, order: list[GraphNode]) -> bool:
    return len({n.line for n in order if n.op in _accepted(word)}) == 1


def _accepted(word: str) -> tuple[str, ...]:
    return (*GRAPH_ATEN_ALIASES.get(word, ()), word)


class Claims(set[str]):
    """The graph nodes given to a wrapper's kernels by lines_from_ops, and where in the
    graph's order the last kernel placed began (`at`): a kernel runs after the one before
    it, so it takes its nodes from there on. (A look's resnet: the convolutions Inductor
    made no layout kernel for were left untaken, and a later block's kernel took the
    stem's line, 12 of 15 kernels given a line Inductor's records do not.)"""

    at: int = 0


def _claim(words: list[str], order: list[GraphNode], claimed: set[str]) -> list[str]:
    """For each word, the first node not yet taken that computes it, from where the last
    kernel began on; where all are taken, the first from there on (a kernel may compute
    again what an earlier one did, or a common op was given to the one before), else a
    word on one line alone still names it; any other is left out."""
    lines: list[str] = []
    start = claimed.at if isinstance(claimed, Claims) else 0
    took: list[int] = []
    for word in words:
        accepted = _accepted(word)
        hits = [(i, n) for i, n in enumerate(order) if n.op in accepted]
        after = [(i, n) for i, n in hits if i >= start]
        found = next(((i, n) for i, n in after if n.name not in claimed), None)
        if found is None:  # taken already: the first from there on, else its one line
            one = len({n.line for _, n in hits}) == 1
            found = after[0] if after else hits[0] if one else None
        if found is None:
            continue
        i, node = found
        claimed.add(node.name)
        took.append(i)
        if node.line not in lines:
            lines.append(node.line)
    if took and isinstance(claimed, Claims):
        claimed.at = min(took)
    return lines


def nodes_computing(
    names: list[str], op: str, graph: list[GraphNode], claimed: set[str]
) -> list[str]:
    """Of a group of graph nodes, the one that computes `op` (a library call's `aten.addmm`
    is its group's `linear`, not the layer norm before it): the first that no earlier call
    took."""
    word = _op_word(op)
    accepted = GRAPH_ATEN_ALIASES.get(word, (word,))
    computing = {n.name for n in graph if n.op in accepted}
    hits = [n for n in names if n in computing]
    node = next((n for n in hits if n not in claimed), hits[0] if hits else None)
    if node is None:
        return []
    claimed.add(node)
    return [node]


def node_modules(graph_code: str) -> dict[str, str]:
    """FX node name -> the submodule whose parameters or buffers it uses (`body.0`), from
    the Dynamo graph's own names for them."""
    out: dict[str, str] = {}
    for line in graph_code.splitlines():
        a = GRAPH_NODE_ASSIGN.match(line)
        if not a:
            continue
        _, _, rhs = line.partition("=")
        m = GRAPH_MODULE_STATE.search(rhs)
        if m:
            path = ".".join(m["path"].split(GRAPH_MODULE_SEP))
            for name in a["names"].split(","):
                out.setdefault(name.strip(), path)
    return out


def provenance_nodes(c: Compile) -> list[dict[str, list[list[str]]]]:
    """For each of the compile's wrappers: kernel name -> for each call of it, in order,
    the Dynamo graph nodes it computes (Inductor's provenance node mappings, 2.10+)."""
    out = []
    for data in c.json_artifacts(PROVENANCE_NODE_MAPPINGS):
        if not isinstance(data, dict):
            continue
        post_to_pre = data.get(PROVENANCE_POST_TO_PRE) or {}
        calls: list[tuple[int, str, list[str]]] = []
        for key, posts in (data.get(PROVENANCE_KERNEL_TO_POST) or {}).items():
            name, _, index = key.rpartition(":")
            if "." in name:  # a library call: its own node, not the views folded into it
                op = extern_op(name).removeprefix("aten.")
                posts = [p for p in posts if re.fullmatch(rf"{re.escape(op)}(_\d+)?", p)] or posts
            nodes = dict.fromkeys(p for post in posts for p in post_to_pre.get(post, []))
            calls.append((int(index) if index.isdigit() else 0, name, list(nodes)))
        by_name: dict[str, list[list[str]]] = {}
        for _, name, own in sorted(calls):
            by_name.setdefault(name, []).append(own)
        out.append(by_name)
    return out


def mappings_for(code: str, mappings: list[dict[str, list[list[str]]]]) -> dict:
    """The node mappings of the wrapper `code` (forward and backward each have their own):
    the one whose generated kernels it defines."""
    best, score = {}, 0
    for m in mappings:
        n = sum(1 for name in m if "." not in name and f"{name} = " in code)
        if n > score:
            best, score = m, n
    return best


@functools.cache
def known_ops() -> dict[str, str]:
    """Every op name of the releases compilediag is tested on -> its namespace (`aten`, the
    collectives' `_c10d_functional`; ATen's where a name is in several): data/ops.txt, made
    from torch itself by tests/fixtures/make_ops.py; read, not imported from torch."""
    text = (Path(__file__).resolve().parents[2] / "data" / "ops.txt").read_text()
    out: dict[str, str] = {}
    for line in text.splitlines():
        ns, sep, name = line.partition("::")
        if sep and not line.startswith("#") and out.get(name) != "aten":
            out[name] = ns
    return out


def ops_from_name(name: str, known: set[str]) -> list[str]:
    """`cpp_fused_add_native_layer_norm_view_1` -> aten.add, aten.native_layer_norm, aten.view.

    Inductor names a fused kernel after the original ops it holds, joined by `_` (an op
    whose own name starts with `_` leaves a double underscore: `_log_softmax`). The name is
    split into op names - the graph's own (`known`) and every op torch has (known_ops) -
    choosing the split with the fewest ops, ATen's first (`native_layer_norm_backward` is
    one op, not two); words no op covers stay one op of their own, not one op per word. Each op is
    named with its namespace (`aten.add`, `_c10d_functional.all_reduce`).
    """
    _, sep, body = name.partition(FUSED_INFIX)
    if not sep or body.isdigit():  # `cpp_fused_0`: the name holds no op
        return []
    words = KERNEL_SUFFIX.sub("", body).split("_")
    namespaces = {**known_ops(), **dict.fromkeys(known, "aten")}

    def op_of(piece: str) -> str | None:
        for candidate in (piece, piece.lstrip("_")):
            if candidate in namespaces:
                return f"{namespaces[candidate]}.{candidate}"
        return None

    def cost(op: str | None) -> int:
        """An ATen op 1, another namespace's more (a name ATen splits stays ATen's), a
        word of no op the most."""
        return 100 if op is None else 1 if op.startswith("aten.") else 3

    n = len(words)
    # best[i]: the cheapest split of words[i:], and where the piece that starts at i ends
    best: list[tuple[int, int]] = [(0, n)] * (n + 1)
    for i in range(n - 1, -1, -1):
        options = [
            (cost(op) + best[j][0], j)
            for j in range(i + 1, n + 1)
            if (op := op_of("_".join(words[i:j])))
        ]
        options.append((cost(None) + best[i + 1][0], i + 1))
        best[i] = min(options)
    ops: list[str] = []
    unknown: list[str] = []
    i = 0
    while i < n:
        j = best[i][1]
        piece = "_".join(words[i:j])
        op = op_of(piece)
        if op is None:
            unknown.append(piece)
        else:
            if unknown:
                ops.append("aten." + "_".join(unknown))
                unknown = []
            ops.append(op)
        i = j
    if unknown:
        ops.append("aten." + "_".join(unknown))
    return list(dict.fromkeys(op for op in ops if op != "aten."))


def provenance_lines(c: Compile) -> dict[str, list[str]]:
    """Kernel name -> user `file:line`s, from Inductor's provenance stack traces."""
    out: dict[str, list[str]] = {}
    for payload in c.artifacts.get("inductor_provenance_tracking_kernel_stack_traces", []):
        try:
            data = json.loads(payload)
        except ValueError:
            continue
        for key, stacks in (data or {}).items():
            name = key.rsplit(":", 1)[0]
            lines = out.setdefault(name, [])
            for stack in stacks:
                frames = list(STACK_FILE_LINE.finditer(stack))
                # the innermost of the user's frames; inside a library model, the library's
                users = [f for f in frames if not is_library_file(f["file"])] or frames
                if users:
                    where = f"{users[-1]['file']}:{users[-1]['line']}"
                    if where not in lines:
                        lines.append(where)
    return out


def extern_op(name: str) -> str:
    """`extern_kernels.addmm` -> aten.addmm; `torch.ops.aten.convolution.default` ->
    aten.convolution; `torch.ops._c10d_functional.all_reduce_.default` ->
    _c10d_functional.all_reduce_."""
    parts = name.removesuffix(".default").split(".")
    if len(parts) >= 4 and parts[0] == "torch" and parts[1] == "ops":
        return f"{parts[2]}.{parts[3]}"
    return "aten." + parts[-1]
