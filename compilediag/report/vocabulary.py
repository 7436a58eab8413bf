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
    BOOL = "bool"
    OTHER = "other"


class BreakCause(StrEnum):
    """What a graph break is, by compilediag's rules (fixes/); `fix` rewrites some of them
    (fixes/patches: CONSTRUCTS), `run --try-fixes` tries a setting for others."""

    ASSERT = "assert"  # an assert on a value Dynamo cannot know
    AUTOGRAD_IN_GRAPH = "autograd_in_graph"  # backward() or torch.autograd inside the graph
    BREAK_IN_LOOP = "break_in_loop"  # a break inside a loop
    BUILTIN = "builtin"  # a builtin operator Dynamo cannot call
    CHECKPOINT_SIDE_EFFECT = "checkpoint_side_effect"  # a side effect in a checkpointed function
    CLASS_DEFINITION = "class_definition"  # a class defined in the compiled function
    CLOSURE_CELL = "closure_cell"  # a closure's cell written
    COMPILER_DISABLE = "compiler_disable"  # a function under torch.compiler.disable
    CONTEXT_MANAGER = "context_manager"  # a context manager Dynamo cannot enter
    COPY_TENSOR = "copy_tensor"  # copy.copy / deepcopy of a tensor
    CREATED_IN_GRAPH = "created_in_graph"  # an object made inside the graph
    DATA_DEPENDENT_BRANCH = "data_dependent_branch"  # an `if` on a tensor's value
    DATA_DEPENDENT_OP = "data_dependent_op"  # a Python result from the data (torch.equal)
    DATA_PTR = "data_ptr"  # .data_ptr()
    DYNAMIC_OUTPUT_SHAPE = "dynamic_output_shape"  # a shape from the data (nonzero)
    DYNAMIC_OUTPUT_SHAPE_NO_META = "dynamic_output_shape_no_meta"  # the same, no meta kernel
    EXCEPTION = "exception"  # an exception raised or handled
    EXPLICIT_GRAPH_BREAK = "explicit_graph_break"  # torch._dynamo.graph_break() and its kin
    FAKE_TENSOR = "fake_tensor"  # an op that cannot run on fake tensors
    GENERATOR = "generator"  # a Python generator
    GENERATOR_RNG = "generator_rng"  # a torch.Generator's state
    HOP_SIDE_EFFECT = "hop_side_effect"  # a side effect in torch.cond or another higher-order op
    ITEM = "item"  # .item() and other tensor-to-number reads
    ITEM_BRANCH = "item_branch"  # an .item() value steering Python control flow
    ITERATOR_INPUT = "iterator_input"  # an iterator made outside the graph
    LOGGING = "logging"  # a logger's call
    MISSING_FAKE_KERNEL = "missing_fake_kernel"  # a custom op's missing or wrong fake kernel
    MODULE_INIT = "module_init"  # a module built inside the compiled function
    NUMPY = "numpy"  # a NumPy call torch._numpy does not model
    OPTREE = "optree"  # optree's C functions
    PRINT = "print"  # print()
    PYTHON_BUILTIN = "python_builtin"  # a Python C function Dynamo cannot trace
    REQUIRES_GRAD_IN_GRAPH = "requires_grad_in_graph"  # requires_grad changed inside the graph
    SKIPPED_FUNCTION = "skipped_function"  # a function Dynamo skips on purpose
    SORT_TENSORS = "sort_tensors"  # sorted() over tensors
    SPARSE_TENSOR = "sparse_tensor"  # a sparse tensor read in compiled code
    TENSOR_TO_STRING = "tensor_to_string"  # str()/format() of a tensor
    TOLIST = "tolist"  # .tolist()
    TORCH_UNTRACEABLE = "torch_untraceable"  # a torch function not traceable by design
    UNRECONSTRUCTABLE_OUTPUT = "unreconstructable_output"  # an output Dynamo cannot rebuild
    UNSUPPORTED_CALL = "unsupported_call"  # a call Dynamo cannot trace
    WARNING = "warning"  # warnings.warn()
    OTHER = "other"  # no rule of ours: torch's hints, or the generic advice


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


class StepsAt(StrEnum):
    """What a `run` job's steps were counted at."""

    OPTIMIZER = "optimizer"  # its optimizer's steps (its class), where it made one
    ENTRY = "entry"  # calls of what torch.compile returned, compiled or eager
    FRAME = "frame"  # the first compiled frame's graphs, where the entry could not be seen


class RestKind(StrEnum):
    """An op a `run` step ran outside its parts and outside the compiled graphs."""

    SYNC = "sync"  # a value read in Python (.item(); on CUDA a wait for the device)
    HOST_READ = "host_read"  # on CUDA, a value read of a host tensor: no wait for the device
    TO_DEVICE = "to_device"  # the data's copy to the device
    COPY = "copy"  # a copy or cast
    EAGER = "eager"  # any other op: the loss or a metric computed eagerly


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
    CLOSE_TO_LIMIT = "close_to_limit"  # a frame at half of torch's recompile limit or more
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
    NOTHING_TO_TRY = "nothing_to_try"  # --try-fixes found no remedy the findings call for
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
    WORSE = "worse"  # more breaks or recompiles, or graphs, than without it
    BREAKS_OUTPUTS = "breaks outputs"
    FAILED = "failed"
