"""Kernels: read Inductor's output code (C++ on CPU, Triton on CUDA) from the trace.

For each graph, Inductor logs its wrapper module (`inductor_output_code`). Generated kernels
are defined in it as `NAME = async_compile.<backend>(..., '''SOURCE''' ...)`; the wrapper's
`call()` runs them in order, each call preceded by Inductor's comment
`# Topologically Sorted Source Nodes: [fx nodes], Original ATen: [aten ops]`. Library calls
(`extern_kernels.mm`, `torch.ops.aten.*`) appear there too: that is what was not fused.
The FX node names map to the user's lines through the Dynamo graph's `# File:` comments.

AOTInductor (torch._inductor.aoti_compile_and_package) writes C++ instead (graph_dump
records): its kernels are `extern "C"` functions, its library calls `aoti_torch_<device>_<op>`,
under the same source-node comments.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from compilediag.analysis.history import History
from compilediag.paths import Owner, is_library_file, owner_of
from compilediag.report.model import Kernel
from compilediag.report.vocabulary import KernelKind
from compilediag.trace.compiles import Compile
from compilediag.trace.formats import (
    AOT_BACKWARD_ID,
    AOT_EXTERN_CALL,
    AOT_KERNEL_DEFINITION,
    ATEN_TARGET,
    EXTERN_CALL,
    FUSED_INFIX,
    GRAPH_ATEN_ALIASES,
    GRAPH_COMMON_OPS,
    GRAPH_FILE_COMMENT,
    GRAPH_LAYOUT_OPS,
    GRAPH_MODULE_SEP,
    GRAPH_MODULE_STATE,
    GRAPH_NODE_ASSIGN,
    GRAPH_NODE_CALL,
    GRAPH_NODE_OPERATOR,
    GRAPH_OPERATORS,
    KERNEL_BODY_OPS,
    KERNEL_CALL,
    KERNEL_DEFINITION,
    KERNEL_EXT,
    KERNEL_MOVES,
    KERNEL_REDUCES,
    KERNEL_SOURCE_QUOTE,
    KERNEL_SUFFIX,
    KERNEL_VALUE,
    PROVENANCE_KERNEL_TO_POST,
    PROVENANCE_NODE_MAPPINGS,
    PROVENANCE_POST_TO_PRE,
    SOURCE_NODES,
    STACK_FILE_LINE,
    TRITON_KINDS,
)


@dataclass
class KernelSource:
    kernel: Kernel
    source: str  # empty for library calls
    ext: str


@dataclass
class GraphCode:
    compile_id: str
    wrapper: str
    kernels: list[KernelSource]


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
    line of the user's, and is left out)."""
    out: list[GraphNode] = []
    for a, place, line in _assignments(graph_code):
        if owner_of(place.rpartition(":")[0]) == Owner.TORCH:
            continue
        call, operator = GRAPH_NODE_CALL.search(line), GRAPH_NODE_OPERATOR.search(line)
        op = call["fn"] if call else GRAPH_OPERATORS[operator["op"]] if operator else ""
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
    (`gelu`, not one of nine `linear`s). Layout ops are no evidence; ops any line may hold (add, mul, sum...) count
    only for a kernel whose other ops place nothing. A line that can't be told is left out
    (tests: every matched line is one Inductor's provenance records give, where they exist)."""
    order = nodes[::-1] if backward else nodes
    whole = [op for op in ops if not op.endswith("_")]  # `aten.softmax_`: a split gone wrong
    words = [w for w in dict.fromkeys(map(_op_word, whole)) if w and w not in GRAPH_LAYOUT_OPS]
    if backward:  # its kernels' order follows the forward's less closely: one line or none
        words = [w for w in words if len({n.line for n in order if n.op in _accepted(w)}) == 1]
    telling = [w for w in words if w not in GRAPH_COMMON_OPS]
    return _claim(telling, order, claimed) or _claim(words, order, claimed)


def _accepted(word: str) -> tuple[str, ...]:
    return GRAPH_ATEN_ALIASES.get(word, (word,))


def _claim(words: list[str], order: list[GraphNode], claimed: set[str]) -> list[str]:
    lines: list[str] = []
    for word in words:
        accepted = _accepted(word)
        hits = [n for n in order if n.op in accepted]
        if not hits:
            continue
        node = next((n for n in hits if n.name not in claimed), hits[0])
        claimed.add(node.name)
        if node.line not in lines:
            lines.append(node.line)
    return lines


def _computing(names: list[str], op: str, graph: list[GraphNode], claimed: set[str]) -> list[str]:
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


def _mappings_for(code: str, mappings: list[dict[str, list[list[str]]]]) -> dict:
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
    text = (Path(__file__).resolve().parent.parent / "data" / "ops.txt").read_text()
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


def _kind(name: str, backend: str, source: str) -> KernelKind:
    """From the kernel's body: a kernel that computes no value only copies (a layout
    change, whatever its name says); else Triton's name prefix, or on C++ an accumulator."""
    if source and not computes(source):
        return KernelKind.COPY
    for prefix, kind in TRITON_KINDS.items():
        if name.startswith(prefix):
            return KernelKind(kind)
    if backend.startswith("cpp"):
        return KernelKind.REDUCTION if KERNEL_REDUCES.search(source) else KernelKind.POINTWISE
    return KernelKind.OTHER


def computes(source: str) -> bool:
    """Does a kernel's body compute a value, or only load, convert and store?"""
    if KERNEL_REDUCES.search(source):
        return True
    return any(not KERNEL_MOVES.match(m["rhs"].strip()) for m in KERNEL_VALUE.finditer(source))


def ops_from_body(source: str) -> list[str]:
    """What the computed values do (`tmp4 = tmp0 / tmp3` -> aten.div), in a fixed order."""
    computed = "\n".join(
        [
            m["rhs"]
            for m in KERNEL_VALUE.finditer(source)
            if not KERNEL_MOVES.match(m["rhs"].strip())
        ]
        + [line for line in source.splitlines() if KERNEL_REDUCES.search(line)]
    )
    return ["aten." + op for pattern, op in KERNEL_BODY_OPS if pattern.search(computed)]


def _definitions(code: str) -> dict[str, tuple[str, str]]:
    """name -> (backend, source) for every kernel the wrapper defines."""
    out: dict[str, tuple[str, str]] = {}
    q = KERNEL_SOURCE_QUOTE
    for m in KERNEL_DEFINITION.finditer(code):
        start = code.find(q, m.end())
        end = code.find(q, start + len(q)) if start >= 0 else -1
        if start < 0 or end < 0:
            continue
        out[m["name"]] = (m["backend"], code[start + len(q) : end].strip("\n") + "\n")
    return out


def _aot_definitions(code: str) -> dict[str, tuple[str, str]]:
    """name -> ("cpp", source) for every `extern "C"` kernel AOTInductor's C++ defines."""
    out: dict[str, tuple[str, str]] = {}
    for m in AOT_KERNEL_DEFINITION.finditer(code):
        end = code.find("\n}", m.end())  # the body closes at the start of a line
        end = len(code) if end < 0 else end + 2
        out.setdefault(m["name"], ("cpp", code[m.start() : end] + "\n"))
    return out


def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _generated(name: str, definition: tuple[str, str], compile_id: str) -> KernelSource:
    backend, source = definition
    kernel = Kernel(
        name=name,
        kind=_kind(name, backend, source),
        compile_id=compile_id,
        lines=source.count("\n"),
    )
    return KernelSource(kernel, source, KERNEL_EXT.get(backend, ".txt"))


def extern_op(name: str) -> str:
    """`extern_kernels.addmm` -> aten.addmm; `torch.ops.aten.convolution.default` ->
    aten.convolution; `torch.ops._c10d_functional.all_reduce_.default` ->
    _c10d_functional.all_reduce_."""
    parts = name.removesuffix(".default").split(".")
    if len(parts) >= 4 and parts[0] == "torch" and parts[1] == "ops":
        return f"{parts[2]}.{parts[3]}"
    return "aten." + parts[-1]


def kernels_of_graph(
    compile_id: str,
    code: str,
    nodes: dict[str, str],
    known_ops: set[str] | None = None,
    provenance: dict[str, list[str]] | None = None,
    aot: bool = False,
    modules: dict[str, str] | None = None,
    mapped: dict[str, list[list[str]]] | None = None,
    graph: list[GraphNode] | None = None,
) -> list[KernelSource]:
    """`aot`: `code` is AOTInductor's C++ (wrapper and kernels), not a Python wrapper.
    `modules`: node -> submodule (node_modules); `mapped`: this wrapper's provenance node
    mappings (provenance_nodes), which name a kernel's own nodes where the comment above
    a call names its whole group; `graph`: the Dynamo graph's nodes (graph_nodes), for the
    lines of a kernel that neither names."""
    defs = _aot_definitions(code) if aot else _definitions(code)
    found: dict[str, KernelSource] = {}
    claimed: set[str] = set()  # graph nodes given to a kernel by lines_from_ops
    backward = bool(AOT_BACKWARD_ID.search(code))
    pending: re.Match[str] | None = None
    extern_seen = 0
    calls_seen: dict[str, int] = {}
    modules, mapped = modules or {}, mapped or {}

    def lines_of(node_names: list[str]) -> list[str]:
        return list(dict.fromkeys(nodes[n] for n in node_names if n in nodes))

    def own_nodes(name: str, match: re.Match[str] | None) -> list[str]:
        """The graph nodes the `calls_seen[name]`-th call of `name` computes."""
        i = calls_seen.get(name, 0)
        calls_seen[name] = i + 1
        if i < len(mapped.get(name, [])):
            return mapped[name][i]
        return _split(match["nodes"]) if match else []

    def modules_of(node_names: list[str]) -> list[str]:
        return list(dict.fromkeys(modules[n] for n in node_names if n in modules))

    for line in code.splitlines():
        m = SOURCE_NODES.search(line)
        if m:
            pending = m
            continue
        call = KERNEL_CALL.match(line)
        if call and call["name"] in defs and not line.lstrip().startswith(call["name"] + " ="):
            name = call["name"]
            if name not in found:
                found[name] = _generated(name, defs[name], compile_id)
            k = found[name].kernel
            own = own_nodes(name, pending)
            if calls_seen[name] == 1:  # a kernel called again computes the same nodes' kind
                k.modules, k.source_lines = modules_of(own), lines_of(own)
            if pending is not None and not k.ops:
                k.ops = _split(pending["aten"])
            pending = None
            continue
        ext = AOT_EXTERN_CALL.search(line) if aot else EXTERN_CALL.match(line)
        if ext and "assert_" not in line and (not aot or ext["op"] not in AOT_NOT_OPS):
            extern_seen += 1
            name = f"aten.{ext['op']}" if aot else ext["name"]
            own = own_nodes(name, pending)
            if graph and len(own) > 1 and not mapped.get(name):  # the comment names a group
                own = _computing(own, extern_op(name), graph, claimed) or own
            found[f"{name}#{extern_seen}"] = KernelSource(
                # a library call fuses nothing: it is the one op it names (the
                # "Original ATen" list above it is its whole node group: views, t, ...)
                Kernel(name=name, kind=KernelKind.EXTERN, compile_id=compile_id,
                       ops=[extern_op(name)], source_lines=lines_of(own),
                       modules=modules_of(own)),
                "", "",
            )  # fmt: skip
            pending = None
    # kernels defined but never called from call() (rare) still count as generated
    for name, definition in defs.items():
        if name not in found:
            found[name] = _generated(name, definition, compile_id)
    for ks in found.values():
        k = ks.kernel
        if not k.ops and k.kind != "extern":
            k.ops = ops_from_name(k.name, known_ops or set()) or ops_from_body(ks.source)
        if provenance and provenance.get(k.name) and (not k.source_lines or k.kind != "extern"):
            k.source_lines = provenance[k.name]
        elif graph and not k.source_lines and k.kind != "extern":
            k.source_lines = lines_from_ops(k.ops, graph, claimed, backward)
    return list(found.values())


def collect_kernels(h: History) -> list[GraphCode]:
    graphs = []
    for c in (e.compile for e in h):
        nodes = node_lines(c.output_graph)
        # op names to split fused-kernel names on: the AOT graph's ops and the wrapper's own
        # "Original ATen" comments
        known = set(ATEN_TARGET.findall(c.aot_graph))
        for code in c.output_code:
            for m in SOURCE_NODES.finditer(code):
                known.update(op.removeprefix("aten.") for op in _split(m["aten"]))
        prov = _this_compiles(provenance_lines(c), nodes)
        mods = node_modules(c.output_graph)
        mappings = provenance_nodes(c)
        graph = graph_nodes(c.output_graph)
        for code in c.output_code:
            kernels = kernels_of_graph(
                c.compile_id, code, nodes, known, prov,
                modules=mods, mapped=_mappings_for(code, mappings), graph=graph,
            )  # fmt: skip
            graphs.append(GraphCode(c.compile_id, code, kernels))
    return graphs


def _this_compiles(prov: dict[str, list[str]], nodes: dict[str, str]) -> dict[str, list[str]]:
    """Provenance lines of the files this compile's Dynamo graph came from (or a file of
    the same folder and name: another checkout, see `relocated`). After an FX graph cache
    hit, Inductor's records are those of the run that filled the cache, which may have
    been another script with the same model: its lines are dropped, and the kernel's
    lines matched from this graph instead."""
    files = {place.rpartition(":")[0] for place in nodes.values()}
    if not files:
        return prov
    tails = {_tail(f) for f in files}
    return {
        name: [p for p in places if (f := p.rpartition(":")[0]) in files or _tail(f) in tails]
        for name, places in prov.items()
    }


# AOTInductor runtime calls that allocate or view tensors: no op of the model
AOT_NOT_OPS = {"empty_strided", "new_tensor_handle", "reinterpret_tensor", "as_strided"}


def collect_aot_kernels(h: History) -> list[GraphCode]:
    """AOTInductor's kernels: the C++ dumps of each compile (or of the run, outside any)."""
    groups: dict[str, list[str]] = {}
    for cid, code in h.aot_code:
        groups.setdefault(cid, []).append(code)
    graphs = []
    for cid, codes in groups.items():
        c = h.by_id[cid].compile if cid in h.by_id else None
        nodes = node_lines(c.output_graph) if c else {}
        known = set(ATEN_TARGET.findall(c.aot_graph)) if c else set()
        code = "\n".join(codes)
        for m in SOURCE_NODES.finditer(code):
            known.update(op.removeprefix("aten.") for op in _split(m["aten"]))
        label = cid or "aot"
        mods = node_modules(c.output_graph) if c else {}
        kernels = kernels_of_graph(label, code, nodes, known, aot=True, modules=mods)
        graphs.append(GraphCode(label, code, kernels))
    return graphs


def all_kernels(h: History) -> list[GraphCode]:
    """Every graph's generated code: torch.compile's wrappers, then AOTInductor's C++."""
    return collect_kernels(h) + collect_aot_kernels(h)


def generated(graphs: list[GraphCode]) -> list[Kernel]:
    """Every kernel, generated ones first in graph order, then the library calls."""
    ks = [k.kernel for g in graphs for k in g.kernels]
    return [k for k in ks if k.kind != "extern"] + [k for k in ks if k.kind == "extern"]


def relocated(kernels: list[Kernel], h: History) -> list[Kernel]:
    """A kernel Inductor took from its cache keeps the source lines of the compile that
    filled the cache, which may have run from another checkout of the same code: point a
    line whose file this run did not compile at this run's file of the same name (the same
    folder and file name)."""
    files = {e.metrics.co_filename for e in h} | {f.file for e in h for f in e.compile.stack}
    by_tail = {_tail(f): f for f in sorted(files) if f.startswith("/")}

    def here(place: str) -> str:
        file, sep, line = place.rpartition(":")
        if not sep or file in files or _tail(file) not in by_tail:
            return place
        return f"{by_tail[_tail(file)]}:{line}"

    for k in kernels:
        k.source_lines = list(dict.fromkeys(here(p) for p in k.source_lines))
    return kernels


def _tail(path: str) -> str:
    return "/".join(path.replace("\\", "/").split("/")[-2:])
