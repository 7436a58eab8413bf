"""The Report's closed vocabularies (each a StrEnum: its text in JSON, equal to that text)
and its findings in words (`Finding`: notes, errors, divergence between ranks)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Source(StrEnum):
    """Where the findings come from."""

    RUN = "run"  # a run compilediag made
    TRACE = "trace"  # a trace any job wrote (`report`, `run --`)
    IN_PROCESS = "in-process"  # the caller's own process (compilediag.testing, capture())


class RecompileCause(StrEnum):
    """What changed between calls, by the failed guard."""

    SHAPE = "shape"  # a size (mark it dynamic)
    BOUNDED = "bounded"  # a size past the bound of an already dynamic dim
    FLOAT = "float"
    INT = "int"
    TRAINING = "training"  # module.training flipped
    OBJECT = "object"  # a different object (id / type match)
    TYPE = "type"
    GLOBAL = "global"
    LENGTH = "length"  # a list or tuple of another length
    TENSOR_META = "tensor_meta"  # a tensor's dtype, device, requires_grad ...
    STRING = "string"
    OTHER = "other"


class FixSource(StrEnum):
    COMPILEDIAG = "compilediag"  # our own fix for the cause
    TORCH_REGISTRY = "torch registry"  # torch's graph-break registry's hints
    TORCH_HINTS = "torch hints"  # the hints torch logged with the break
    GENERIC = "generic"


class CallState(StrEnum):
    COMPILED = "compiled"  # the call compiled a graph
    HIT = "hit"  # it ran a graph already compiled
    LIMIT = "limit"  # past the recompile limit: it ran in eager mode


class KernelKind(StrEnum):
    POINTWISE = "pointwise"
    REDUCTION = "reduction"
    PERSISTENT_REDUCTION = "persistent_reduction"
    TEMPLATE = "template"
    COPY = "copy"  # computes no value: a layout change
    EXTERN = "extern"  # a library call (aten, cuBLAS, oneDNN)
    OTHER = "other"


class Bound(StrEnum):
    CPU = "CPU-bound"
    GPU = "GPU-bound"


class FindingKind(StrEnum):
    """What a note, an error or a divergence between ranks is about."""

    # notes
    UNTESTED_TORCH = "untested_torch"  # a torch outside the tested range made the findings
    AHEAD_OF_TIME = "ahead_of_time"  # a torch.export / AOTInductor trace
    NOTHING_COMPILED = "nothing_compiled"  # no graph came out: all of it ran eager
    SKIPPED_FRAME = "skipped_frame"  # a frame torch gave up on (runs eager)
    CACHE_GAP = "cache_gap"  # a cache hit whose generated code the trace lacks
    NO_PROVENANCE = "no_provenance"  # kernels with no user line (no provenance records)
    MODEL_DEFAULTS = "model_defaults"  # the file's model class, built with its defaults
    IGNORED_FILES = "ignored_files"  # files with no trace record
    DISCARDED_GRAPH = "discarded_graph"  # a graph the backend had, thrown away on a restart
    RANK_VALUES = "rank_values"  # ranks failed the same guards with their own data's values
    OTHER_WORK = "other_work"  # `run`: a training job's evaluation, its steps, its cost
    TIMING_THREADS = "timing_threads"  # explain timed with fewer threads: the cores were busy
    UNRELIABLE_TIMING = "unreliable_timing"  # a figure the one-thread cross-check flags
    EVALUATION_GRAPHS = "evaluation_graphs"  # graphs a rank compiled for its evaluation alone
    DAMAGED_TRACE = "damaged_trace"  # unreadable lines, damaged payloads
    COMPILE_COST = "compile_cost"  # what cuts the compile time: a function, blocks, a cache
    # errors
    COMPILE_FAILED = "compile_failed"
    RUN_ERROR = "run_error"  # a step of the run that failed (the cross-check, the timing)
    # divergence between ranks
    RANK_COUNTS = "rank_counts"  # graphs, recompiles or break sites differ in number
    RANK_BREAKS = "rank_breaks"  # a break site only some ranks have
    RANK_RECOMPILES = "rank_recompiles"  # a recompile only some ranks have
    COLLECTIVES = "collectives"  # collective schedules differ
    GRAPH_ORDER = "graph_order"  # graph execution order differs
    CACHE_USE = "cache_use"  # FX-graph cache hit on some ranks, compiled on others
    COMPILE_TIME = "compile_time"  # a rank compiled much longer than the median
    STRAGGLER = "straggler"  # `run`: a rank whose step the others wait for
    OTHER = "other"  # a finding of a report older than its kind


class Severity(StrEnum):
    NOTE = "note"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Finding:
    """A note, an error or a divergence: what it is about, in words, and where."""

    kind: FindingKind
    message: str
    severity: Severity = Severity.NOTE
    file: str = ""  # the site it is about, where it has one
    line: int = 0
    fix: str = ""

    @property
    def text(self) -> str:
        """One line of a report."""
        return self.message + (f" Fix: {self.fix}" if self.fix else "")


class FixOutcome(StrEnum):
    """What a remedy tried in a run of its own did (--try-fixes)."""

    REMOVES = "removes it"
    PARTLY = "partly"
    CUTS_COMPILE = "cuts compile time"
    NO_EFFECT = "no effect"
    BREAKS_OUTPUTS = "breaks outputs"
    FAILED = "failed"
