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

import re
from dataclasses import dataclass, field

from compilediag.analysis.compile.kernel_origins import (
    Claims,
    GraphNode,
    aot_flow,
    extern_op,
    graph_nodes,
    lines_from_inputs,
    lines_from_ops,
    mappings_for,
    node_lines,
    node_modules,
    nodes_computing,
    ops_from_name,
    provenance_lines,
    provenance_nodes,
    unplaced,
)
from compilediag.analysis.history import History
from compilediag.report.model import Kernel
from compilediag.report.vocabulary import KernelKind
from compilediag.trace.formats import (
    AOT_BACKWARD_ID,
    AOT_EXTERN_CALL,
    AOT_KERNEL_DEFINITION,
    ATEN_TARGET,
    BUFFER,
    BUFFER_MADE,
    BUFFER_REUSE,
    EXTERN_CALL,
    GRAPH_INPUT,
    KERNEL_BODY_OPS,
    KERNEL_CALL,
    KERNEL_DEFINITION,
    KERNEL_EXT,
    KERNEL_MOVES,
    KERNEL_PARAMS,
    KERNEL_REDUCES,
    KERNEL_SOURCE_QUOTE,
    KERNEL_VALUE,
    SOURCE_NODES,
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


def _args(call: str, source: str) -> tuple[list[str], list[str]]:
    """The arguments of a kernel's call that it reads, and that it writes, by their
    parameters in the kernel's signature: `in_ptr0` read, `out_ptr0` written (a buffer a
    freed one's memory was given to), `in_out_ptr0` both. Where the signature can't be
    read, all of them read and none written."""
    args = [a.strip() for a in call.partition("(")[2].rpartition(")")[0].split(",")]
    signature = KERNEL_PARAMS.search(source)
    if signature is None:
        return args, []
    params = [p.split()[-1].lstrip("*") for p in signature[1].split(",") if p.split()]
    if len(params) != len(args):
        return args, []
    pairs = list(zip(args, params, strict=True))
    return (
        [a for a, p in pairs if p.startswith(("in_ptr", "in_out_ptr"))],
        [a for a, p in pairs if p.startswith(("out_ptr", "in_out_ptr"))],
    )


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
    aten: list[GraphNode] | None = None,
    aot_code: str = "",
    graph_code: str = "",
) -> list[KernelSource]:
    """`aot`: `code` is AOTInductor's C++ (wrapper and kernels), not a Python wrapper.
    `modules`: node -> submodule (node_modules); `mapped`: this wrapper's provenance node
    mappings (provenance_nodes), which name a kernel's own nodes where the comment above
    a call names its whole group; `graph`: the Dynamo graph's nodes (graph_nodes), for the
    lines of a kernel that neither names; `aten`: the AOT graph's, the ATen ops a call
    decomposed to (F.normalize's clamp_min and div, which no Dynamo node is named)."""
    defs = _aot_definitions(code) if aot else _definitions(code)
    calls = _Calls(compile_id, defs, nodes, modules or {}, mapped or {}, graph)
    calls.read(code, aot)
    found = calls.found
    # kernels defined but never called from call() (rare) still count as generated
    for name, definition in defs.items():
        if name not in found:
            found[name] = _generated(name, definition, compile_id)
    backward = bool(AOT_BACKWARD_ID.search(code))
    aten_claimed = Claims()
    flow = aot_flow(aot_code, aten) if aten and aot_code and not backward else None
    dynamo = aot_flow(graph_code, graph or []) if flow else None
    for ks in found.values():
        k = ks.kernel
        if flow and dynamo and not (provenance and provenance.get(k.name)) and not k.source_lines:
            _fill_ops(ks, known_ops or set())
            k.source_lines = lines_from_inputs(
                k.ops, calls.inputs.get(k.name, []), flow, calls.made_by.get(k.name, []), dynamo
            )
        _complete(ks, known_ops or set(), provenance, graph, calls.claimed, backward,
                  aten, aten_claimed)  # fmt: skip
    return list(found.values())


@dataclass
class _Calls:
    """The wrapper's calls in order: each generated kernel's and library call's own graph
    nodes, and from them its user lines and submodules."""

    compile_id: str
    defs: dict[str, tuple[str, str]]
    nodes: dict[str, str]
    modules: dict[str, str]
    mapped: dict[str, list[list[str]]]
    graph: list[GraphNode] | None
    found: dict[str, KernelSource] = field(default_factory=dict)
    claimed: Claims = field(default_factory=Claims)  # graph nodes given by lines_from_ops
    calls_seen: dict[str, int] = field(default_factory=dict)
    extern_seen: int = 0
    inputs: dict[str, list[str]] = field(default_factory=dict)  # the graph inputs a call reads
    # a buffer a library call made -> that call's own graph nodes; a generated call -> those
    # of the library calls that made the buffers it reads
    made: dict[str, list[str]] = field(default_factory=dict)
    made_by: dict[str, list[str]] = field(default_factory=dict)

    def read(self, code: str, aot: bool) -> None:
        pending: re.Match[str] | None = None
        for line in code.splitlines():
            m = SOURCE_NODES.search(line)
            if m:
                pending = m
                continue
            call = KERNEL_CALL.match(line)
            if (
                call
                and call["name"] in self.defs
                and not line.lstrip().startswith(call["name"] + " =")
            ):
                self.generated_call(call["name"], pending)
                read, written = _args(line, self.defs[call["name"]][1])
                self.inputs.setdefault(call["name"], [a for a in read if GRAPH_INPUT.fullmatch(a)])
                made = [x for b in read if BUFFER.fullmatch(b) for x in self.made.get(b, [])]
                self.made_by.setdefault(call["name"], made)
                for b in written:  # its values now this kernel's, no library call's
                    self.made.pop(b, None)
                pending = None
                continue
            if reuse := BUFFER_REUSE.match(line):
                self.made[reuse["new"]] = self.made.get(reuse["old"], [])
                continue
            ext = AOT_EXTERN_CALL.search(line) if aot else EXTERN_CALL.match(line)
            if ext and "assert_" not in line and (not aot or ext["op"] not in AOT_NOT_OPS):
                own = self.library_call(f"aten.{ext['op']}" if aot else ext["name"], pending)
                if out := BUFFER_MADE.match(line):
                    self.made[out[1]] = own
                pending = None

    def generated_call(self, name: str, pending: re.Match[str] | None) -> None:
        if name not in self.found:
            self.found[name] = _generated(name, self.defs[name], self.compile_id)
        k = self.found[name].kernel
        own = self.own_nodes(name, pending)
        if self.calls_seen[name] == 1:  # a kernel called again computes the same nodes' kind
            k.modules, k.source_lines = self.modules_of(own), self.lines_of(own)
        if pending is not None and not k.ops:
            k.ops = _split(pending["aten"])

    def library_call(self, name: str, pending: re.Match[str] | None) -> list[str]:
        """The library call, found; its own graph nodes."""
        self.extern_seen += 1
        own = self.own_nodes(name, pending)
        if self.graph and len(own) > 1 and not self.mapped.get(name):  # the comment names a group
            own = nodes_computing(own, extern_op(name), self.graph, self.claimed) or own
        self.found[f"{name}#{self.extern_seen}"] = KernelSource(
            # a library call fuses nothing: it is the one op it names (the
            # "Original ATen" list above it is its whole node group: views, t, ...)
            Kernel(name=name, kind=KernelKind.EXTERN, compile_id=self.compile_id,
                   ops=[extern_op(name)], source_lines=self.lines_of(own),
                   modules=self.modules_of(own)),
            "", "",
        )  # fmt: skip
        return own

    def own_nodes(self, name: str, match: re.Match[str] | None) -> list[str]:
        """The graph nodes the `calls_seen[name]`-th call of `name` computes."""
        i = self.calls_seen.get(name, 0)
        self.calls_seen[name] = i + 1
        if i < len(self.mapped.get(name, [])):
            return self.mapped[name][i]
        return _split(match["nodes"]) if match else []

    def lines_of(self, node_names: list[str]) -> list[str]:
        return list(dict.fromkeys(self.nodes[n] for n in node_names if n in self.nodes))

    def modules_of(self, node_names: list[str]) -> list[str]:
        return list(dict.fromkeys(self.modules[n] for n in node_names if n in self.modules))


def _complete(
    ks: KernelSource,
    known: set[str],
    provenance: dict[str, list[str]] | None,
    graph: list[GraphNode] | None,
    claimed: set[str],
    backward: bool,
    aten: list[GraphNode] | None,
    aten_claimed: set[str],
) -> None:
    """A kernel's ops where its call named none (from its name, else its body), and its
    lines from Inductor's provenance, else matched from the graph by its ops (and the ops
    no Dynamo node names, from the AOT graph's `aten` nodes; `aten_claimed`: theirs taken)."""
    k = ks.kernel
    _fill_ops(ks, known)
    if provenance and provenance.get(k.name) and (not k.source_lines or k.kind != "extern"):
        k.source_lines = provenance[k.name]
    elif graph and not k.source_lines and k.kind != "extern":
        k.source_lines = lines_from_ops(k.ops, graph, claimed, backward)
        if aten and not backward:  # the ATen ops a call decomposed to (F.normalize's div)
            rest = unplaced(k.ops, graph, placed=bool(k.source_lines))
            more = lines_from_ops(rest, aten, aten_claimed)
            k.source_lines += [x for x in more if x not in k.source_lines]


def _fill_ops(ks: KernelSource, known: set[str]) -> None:
    """A generated kernel's ops where its call named none: from its name, else its body."""
    k = ks.kernel
    if not k.ops and k.kind != "extern":
        named = ops_from_name(k.name, known)
        k.ops, k.ops_by_name = named or ops_from_body(ks.source), bool(named)


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
        graph, aten = graph_nodes(c.output_graph), graph_nodes(c.aot_graph)
        for code in c.output_code:
            kernels = kernels_of_graph(
                c.compile_id, code, nodes, known, prov,
                modules=mods, mapped=mappings_for(code, mappings), graph=graph,
                aten=aten, aot_code=c.aot_graph, graph_code=c.output_graph,
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
