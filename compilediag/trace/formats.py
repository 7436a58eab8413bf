"""Everything compilediag knows about the text torch writes, in one place.

Torch's structured trace is JSON in an envelope, but much of what matters is free text
inside it: break reasons, guard failures, generated code, frame names. Each format below
says which torch releases it was seen in; each is pinned by a test on a trace recorded
from a real run (tests/trace/test_torch_formats.py). When torch changes a format, this file
changes, and nothing else should have to.

Imports nothing heavy (no torch): renderers and the gate may use it. It is one table of
cases, torch's formats one after another, and stays whole: the issue of rooms (#54) moves
torch's text here, not out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from compilediag.report.model import Site

# --- source locations ------------------------------------------------------------------

# Python traceback lines, as torch prints user stacks (all releases).
TRACEBACK_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+), in (?P<name>.+)$')
STACK_FILE_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
CARETS = re.compile(r"^\s*[\^~]+\s*$")

# --- frame names -------------------------------------------------------------------------

# The code after a graph break runs as a new function Dynamo names after the frame and
# line it resumes from (2.6 - 2.13).
RESUME = re.compile(r"torch_dynamo_resume_in_(?P<fn>\w+?)_at_(?P<line>\d+)$")
# torch.compile(module) compiles torch's wrapper `inner` in _dynamo/external_utils.py on
# some releases (2.11, 2.13) before the module's forward (and before a compiled bound
# method's body: `model.generate = torch.compile(model.generate)`).
MODULE_WRAPPER = ("inner", "_dynamo/external_utils.py")


# (a look read the longer "compiled call (torch's wrapper of what torch.compile was given)"
# as jargon, wrapping the Graphs table)
WRAPPER_FRAME = "torch.compile's wrapper"


def is_resume_frame(co_name: str) -> bool:
    return bool(RESUME.match(co_name or ""))


AFTER_BREAK = ", after line "  # a resume frame's name as shown: `forward, after line 9`


def frame_name(co_name: str, co_filename: str = "") -> str:
    """`torch_dynamo_resume_in_forward_at_9` -> `forward, after line 9` (the code after a break)."""
    if co_name == MODULE_WRAPPER[0] and co_filename.endswith(MODULE_WRAPPER[1]):
        return WRAPPER_FRAME
    m = RESUME.match(co_name or "")
    if m:
        return f"{m['fn']}{AFTER_BREAK}{m['line']}"
    return co_name or "?"


# --- graph-break text (artifact dynamo_graph_break_reason, fail_reason) -------------------

BREAK_LOCATION = re.compile(r"Graph break in user code at (?P<file>.+):(?P<line>\d+)\s*$", re.M)
GB_URL = re.compile(r"(https?://\S+/(gb\d+)\.html)", re.I)
# When a break happens while Dynamo handles another one, torch chains the texts with this
# banner; the last part is what made it give up the frame (2.8 - 2.13).
WHILE_HANDLING = "*** While handling this graph break, another graph break occurred: ***"
# a break torch could not resume after: it compiled up to it and ran the rest of the function
# in eager mode (a break inside a `with` block of a context manager it cannot enter, 2.8+)
NO_RESUME = re.compile(r"graph break that we cannot resume from|skipping the rest of the function")


@dataclass
class ParsedBreak:
    """What one break text says."""

    reason: str
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    gb_id: str | None = None
    doc_url: str | None = None
    frames: list[Site] = field(default_factory=list)  # outermost first
    location: Site | None = None  # "Graph break in user code at FILE:LINE"
    raw_reason: str = ""


def parse_break_text(text: str) -> ParsedBreak:
    """Read a break text of torch 2.6 to 2.13.

    2.8+: `Graph Break Reason: <context>\\n\\n<gb_type>\\n  Explanation: ...\\n  Hint: ...`
    then `User code traceback:` and Python frames. 2.6/2.7: `Graph Break Reason:
    Unsupported: call_function BuiltinVariable(print) [...] {}` (no explanation or hints).
    2.11 leaves the source lines out of the traceback.
    """
    loc = BREAK_LOCATION.search(text)
    location = Site(loc["file"], int(loc["line"])) if loc else None

    head, _, tail = text.partition("User code traceback:")
    m = re.search(r"^(?:Graph Break Reason|Reason): ?(.*)", head, re.M | re.S)
    block = m.group(1) if m else head
    lines = block.splitlines()

    expl_at = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Explanation:")), None)
    if expl_at is not None:
        before = [ln for ln in lines[:expl_at] if ln.strip()]
        # the gb_type is the last line at the margin; a higher-order op's break puts an
        # indented context line under it (`  Higher Order Operator: ...checkpoint`)
        at_margin = [ln for ln in before if not ln[:1].isspace()]
        reason = (at_margin or before or [""])[-1].strip()
        explanation, hints = _explanation_and_hints(lines[expl_at:])
    else:
        reason = next((ln.strip() for ln in lines if ln.strip()), "")
        reason = re.sub(r"^(Unsupported|torch\._dynamo\.exc\.\w+): ", "", reason)
        explanation, hints = "", []
    url = GB_URL.search(text)
    return ParsedBreak(
        reason=reason.rstrip(":"),
        explanation=explanation,
        hints=hints,
        gb_id=url.group(2).upper() if url else None,
        doc_url=url.group(1) if url else None,
        frames=traceback_frames(tail),
        location=location,
        raw_reason=block.strip(),
    )


def last_chained_break(reason: str) -> str:
    """The last of the breaks torch chained with its `While handling` banner."""
    return reason.split(WHILE_HANDLING)[-1].strip()


def _explanation_and_hints(lines: list[str]) -> tuple[str, list[str]]:
    explanation: list[str] = []
    hints: list[str] = []
    section = "explanation"
    for ln in lines:
        s = ln.strip()
        if s.startswith("Explanation:"):
            explanation.append(s.removeprefix("Explanation:").strip())
        elif s.startswith("Hint:"):
            section = "hint"
            hints.append(s.removeprefix("Hint:").strip())
        elif s.startswith(("Developer debug context:", "For more details")):
            section = "done"
        elif section == "explanation" and s and not s.startswith("#") and "=" not in s:
            explanation.append(s)
        elif section == "explanation" and not s:
            section = "gap"  # the code context torch adds after a blank line is not prose
    return " ".join(explanation).strip(), hints


def traceback_frames(text: str) -> list[Site]:
    """Python traceback frames (with the source line under each, where torch printed it)."""
    frames: list[Site] = []
    for ln in text.splitlines():
        if ln.startswith(("Traceback (most recent call last)", "NoneType: None")):
            break
        m = TRACEBACK_FRAME.match(ln)
        if m:
            frames.append(Site(m["file"], int(m["line"]), "", m["name"].strip()))
        elif frames and ln.strip() and not CARETS.match(ln) and not frames[-1].code:
            frames[-1].code = ln.strip()
    return frames


# --- recompile and guard text (artifact recompile_reasons, recompile_reason metric) -------

# Each cached graph's failure starts with its compile id: `0/0: tensor 'x' size mismatch...`
GUARD_CID_PREFIX = re.compile(r"^(?:!\d+/)?\d+/\d+: ")
# 2.11+: `L['x'].size()[0] == 2  # x.view(...)  # main/model.py:12 in forward`
GUARD_LOCATION = re.compile(
    r"#\s*(?P<code>.*?)\s*#\s*(?P<file>[^#]+?):(?P<line>\d+) in (?P<fn>\S+)"
)
# each site a guard's text names (a guard of two bounds names two: `2 <= x.size()[0] <= 6  #
# F.linear(...)  # nn/modules/linear.py:134 in forward (...) and if x.shape[0] > 6:  #
# main/model.py:15 in forward`)
# (a site of torch's own with no user line above it in parentheses: `# (_inductor/codegen/
# cpp.py:2397 in need_use_acc_helper)`)
GUARD_SITE = re.compile(r"#\s*\(?(?P<file>[^#\s(][^#]*?):(?P<line>\d+) in (?P<fn>[^\s)]+)")
GUARD_HINT = re.compile(r"\(HINT: (?P<hint>.+?)\)\s*$", re.S)
GUARD_USER_STACK = "\nUser stack trace:"

# the source may hold quotes itself: `tensor 'kwargs['input_ids']' size mismatch ...`
GUARD_SIZE = re.compile(
    r"tensor '(?P<n>.+?)' size mismatch at index (?P<i>\d+)\. expected (?P<a>\d+), actual (?P<b>\d+)"
)
GUARD_LOWER_BOUND = re.compile(r"(?P<lo>\d+) <= (?P<src>.+)\.size\(\)\[(?P<i>\d+)\]$")
# a dynamic dim bounded above by a comparison in the code (`if x.shape[1] < 10:`)
GUARD_RANGE = re.compile(r"(?P<lo>\d+) <= (?P<src>.+)\.size\(\)\[(?P<i>\d+)\] <= (?P<hi>\d+)$")
# any other condition on a dynamic dim (`(x.size()[0] % 2) != 1` of `if n % 2 == 1:`), not an
# equality with a number (a size made static again, GUARD_CONSTANT's)
GUARD_SIZE_CONDITION = re.compile(
    r"^(?!.*\.size\(\)\[\d+\] == -?\d+$).*?"
    r"(?P<src>(?:[LG]\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+|\[[^\]]*\])*?)\.size\(\)\[(?P<i>\d+)\]"
)
GUARD_TENSOR_META = re.compile(
    r"tensor '(?P<n>.+?)' (?P<what>dtype|device|requires_grad|stride|dispatch key set|rank|ndim)s? mismatch(?:[^.]*)\.?\s*(?P<rest>.*)"
)
GUARD_GLOBAL_STATE = re.compile(r"GLOBAL_STATE changed: (?P<what>.+)")
GUARD_TRAINING = re.compile(r"(?P<src>.+)\.training == (?P<v>True|False)$")
# a bool argument or attribute, always baked in (no dynamic bool); after GUARD_TRAINING
GUARD_BOOL = re.compile(r"(?P<src>[^=<>!]+?) == (?P<v>True|False)$")
GUARD_OBJ_ID = re.compile(r"___check_obj_id\((?P<src>[^,]+),")
# torch drops a cache entry whose guarded object was freed (2.6+: a weakref callback)
GUARD_FREED = re.compile(r"Cache line invalidated because (?P<src>.+?) got deallocated")
GUARD_TYPE_ID = re.compile(r"___check_type_id\((?P<src>[^,]+),")
GUARD_LEN = re.compile(r"len\((?P<src>.+)\) == (?P<n>\d+)$")
# an empty container's length guard (a list forward appends to, compiled on its first call)
GUARD_EMPTY = re.compile(r"not (?P<src>[^=<>!()\s]+)$")
GUARD_CONSTANT = re.compile(r"(?P<src>[^=<>!]+?) == (?P<v>-?[\d.]+(?:e-?\d+)?)$")
GUARD_STRING = re.compile(r"(?P<src>[^=<>!]+?) == (?P<v>'[^']*'|\"[^\"]*\")$")
# a symbolic stride guard of a dynamic graph: `x.stride()[0] == s1` (2.6-2.15)
GUARD_STRIDE = re.compile(r"^(?P<n>[^\s=]+?)\.stride\(\)\[(?P<i>\d+)\] == (?P<v>.+?)\s*$")
# the attribute chain a guard reads: `L['self'].config.problem_type` (2.13 writes the local
# by its name: `self.config.problem_type is None`), at the start of the guard or as the
# first argument of a check (`___check_obj_id(...)`)
GUARD_ATTRIBUTE_CHAIN = re.compile(
    r"^(?:\w+\()?(?P<src>(?:[LG]\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+|\._modules\['[^']+'\])+)"
)
# an attribute read from the class: `not ___dict_contains('problem_type', self.config.__dict__)`
GUARD_DICT_CONTAINS = re.compile(r"___dict_contains\('(?P<attr>\w+)', (?P<src>[^()]+?)\.__dict__\)")
# a value guard in a graph's guard tree (artifact dynamo_guards):
# `EQUALS_MATCH: L['self'].config.problem_type == 'x'` (2.6-2.15; 2.6 pads the line with
# spaces, later releases may follow the value with `  # the user's code`)
GUARDS_EQUALS_MATCH = re.compile(r"EQUALS_MATCH: (?P<src>\S+) == (?P<v>.+?)(?:\s+#|\s*$)", re.M)

# --- a mode switch: grad mode, autocast, train()/eval(), inference mode --------------------

# the fields of a GLOBAL_STATE failure that are a mode (`GLOBAL_STATE changed: grad_mode
# autocast(cpu)_enabled`), not a setting (default_dtype, num_threads, torch_function, ...)
GLOBAL_STATE_MODE = re.compile(r"^(?P<mode>grad_mode|autocast\S*)$")
# a dispatch key set failure (`... dispatch key set mismatch. expected DispatchKeySet(CPU,
# BackendSelect, ADInplaceOrView, AutogradCPU), actual DispatchKeySet(CPU, BackendSelect)`):
# a call under torch.inference_mode() differs in the autograd keys alone
GUARD_DISPATCH_KEYS = re.compile(
    r"expected DispatchKeySet\((?P<a>[^)]*)\), actual DispatchKeySet\((?P<b>[^)]*)\)"
)
AUTOGRAD_KEY = re.compile(r"^(?:ADInplaceOrView|Autograd\w*)$")
# a compile's own guards (dynamo_cpp_guards_str, 2.11+): the mode its graph was made in -
# the global state as JSON (`"grad_mode":false`, `"autocast_state":{...,"enabled":[false,
# ...]}`) and each module flag read (`TRUE_MATCH: L['self']._modules['drop'].training == True`)
GUARDS_GRAD_MODE = re.compile(r'"grad_mode":\s*(?P<v>true|false)')
GUARDS_AUTOCAST = re.compile(r'"autocast_state":\s*\{[^{}]*?"enabled":\s*\[(?P<v>[^\]]*)\]')
GUARDS_TRAINING = re.compile(r"\.training == (?P<v>True|False)\b")

# fail_reason of a frame that hit Dynamo's recompile limit (`cache_size_limit` before 2.7)
RECOMPILE_LIMIT = re.compile(r"recompile limit exceeded|cache_size_limit|recompile_limit", re.I)
RECOMPILE_LIMIT_VALUE = re.compile(r"currently set to (\d+)")


def split_recompile_reasons(payload: str) -> list[str]:
    """The `recompile_reasons` artifact: one reason per cached graph that was checked.

    Declared "json" but written as plain text in 2.11/2.13; a JSON list in some releases.
    A reason may span lines; each starts with its compile id.
    """
    import json

    text = payload.strip()
    try:
        value = json.loads(text)
        if isinstance(value, list):
            return [str(v) for v in value]
        if isinstance(value, str):
            text = value
    except ValueError:
        pass
    parts = re.split(r"\n(?=(?:!\d+/)?\d+/\d+: )", text)
    return [p.strip() for p in parts if p.strip()]


def guard_text(reason: str) -> str:
    """A recompile reason without its compile-id prefix and user stack."""
    return GUARD_CID_PREFIX.sub("", reason.split(GUARD_USER_STACK)[0]).strip()


def source_name(text: str) -> str:
    """A guard's source in the user's words: `L['self']._modules['fc'].weight` -> `self.fc.weight`."""
    text = re.sub(r"\b[LG]\['([^']+)'\]", r"\1", text)
    text = re.sub(r"^kwargs\['([^']+)'\]", r"\1", text)  # a keyword input, by its name
    text = re.sub(r"\._modules\['(\d+)'\]", r"[\1]", text)
    text = re.sub(r"\._modules\['([^']+)'\]", r".\1", text)
    text = re.sub(r"\._parameters\['([^']+)'\]", r".\1", text)
    return text


def guard_pattern(text: str) -> str:
    """A guard with its numbers blanked: `x == 0` and `x == 1` are the same reason."""
    return re.sub(r"\d+(\.\d+)?", "#", text)


# --- the FX graph cache's lookups (artifacts fx_graph_cache_hit, _miss, _bypass) -----------

# the artifact of each lookup, and what the lookup found (2.6-2.15)
CACHE_RECORDS = {
    "fx_graph_cache_hit": "hit",
    "fx_graph_cache_miss": "miss",
    "fx_graph_cache_bypass": "bypass",
}
# a key's components, each `[hash] name: value`; these names are an input's metadata and an
# Inductor setting
CACHE_INPUT = re.compile(r"example_inputs\[(\d+)\]$")
CACHE_CONFIG = re.compile(r"inductor_config\[(.+)\]$")
# an input's metadata: `TensorMetadata(dtype=torch.float32, shape=torch.Size([8, 16]), ...)`
TENSOR_META_SHAPE = re.compile(r"shape=torch\.Size\((\[[^\]]*\])\)")
TENSOR_META_DTYPE = re.compile(r"dtype=torch\.(\w+)")

# --- compile failures ---------------------------------------------------------------------

# The exception torch.compile raised (its inner one, named first in the message) -> what
# fixes it. Messages of 2.6 - 2.13.
COMPILE_FAILURE_FIXES = {
    "InvalidCxxCompiler": "Inductor needs a C++ compiler on CPU: install one (e.g. "
    "`apt-get install g++`), or point the CXX environment variable at it.",
    "LoweringException": "Inductor could not lower an op of the graph: try --backend "
    "aot_eager to confirm it is Inductor's, and report it to PyTorch with the op named above.",
    "OutOfMemoryError": "The compile or the compiled code ran out of device memory: try "
    "smaller inputs, or mode=max-autotune-no-cudagraphs.",
}


# fail_type values of compilation_metrics that are not failures: the frame was skipped
# because of a graph break it could not resume from, or the recompile limit
NOT_FAILURES = {"Unsupported", "SkipFrame", "RecompileLimitExceeded", "FailOnRecompileLimitHit"}
# Dynamo's tracer, in a failed compile's traceback (`dynamo_error`): the compile got as far as
# tracing the frame's code
TRACER_FILE = "torch/_dynamo/symbolic_convert.py"


# a compile that failed as Dynamo ran an op on fake tensors (the op refused its inputs: gb4315
# in torch's graph-break site): `… with fake tensors: call_function … got RuntimeError('…')`
FAKE_TENSOR_ERROR = re.compile(
    r"failed to run FX node with fake tensors: .*?: got (?P<type>\w+)\((?P<q>['\"])(?P<message>.*?)(?P=q)\)",
    re.S,
)
FAKE_TENSOR_FIX = (
    "The op refused these inputs as torch traced it ({error}): most likely an error of the "
    "program itself, which the call raises without torch.compile too (torch's hint says to "
    'check: `torch.compiler.set_stance("force_eager")` runs it so). Fix the inputs or the op '
    "there; marking a size dynamic cannot help."
)
# the same, where the job was run again without torch.compile: ({error} is its own error)
FAKE_TENSOR_EAGER = (
    "Run again without torch.compile (TORCHDYNAMO_DISABLE=1), the job fails the same way "
    "({error}): an error of the program itself, not torch.compile's. Fix the inputs or the op "
    "there; marking a size dynamic cannot help."
)
FAKE_TENSOR_COMPILE_ONLY = (
    "Run again without torch.compile (TORCHDYNAMO_DISABLE=1), the job ran to its end: the "
    "error is torch.compile's tracing of the op ({error}), not the program's. Report it to "
    'PyTorch with this error; `torch.compiler.set_stance("force_eager")` around the call '
    "runs it meanwhile."
)
# a recompile whose compile failed so: its advice is the failure's
FAKE_TENSOR_RECOMPILE = (
    "This call's compile failed: the op refused its inputs (torch.compile failed, {cid}). "
    "That error is the one to fix; marking the size dynamic cannot help."
)


def compile_failure_fix(message: str) -> str:
    head = message.split(":", 1)[0].strip()
    return COMPILE_FAILURE_FIXES.get(head, "")


# --- Inductor's generated code (inductor_output_code) -----------------------------------

# `triton_poi_fused_add_0 = async_compile.triton('triton_poi_fused_add_0', '''SOURCE''', ...)`
# (2.6 - 2.13; `cpp_pybinding` on CPU)
KERNEL_DEFINITION = re.compile(r"^(?P<name>\w+) = async_compile\.(?P<backend>\w+)\(", re.M)
KERNEL_SOURCE_QUOTE = "'''"
# the comment above each kernel call in the wrapper's call()
SOURCE_NODES = re.compile(
    r"#\s*Topologically Sorted Source Nodes: \[(?P<nodes>[^\]]*)\](?:, Original ATen: \[(?P<aten>[^\]]*)\])?"
)
EXTERN_CALL = re.compile(
    r"^\s*(?:\w+(?:, \w+)* = )?(?P<name>extern_kernels\.\w+|torch\.ops\.\w+\.\w+(?:\.\w+)?)\("
)
KERNEL_CALL = re.compile(r"^\s*(?P<name>\w+)(?:\.run)?\(")
# the Dynamo graph's comments naming the user line of each node
GRAPH_FILE_COMMENT = re.compile(
    r"^\s*# File: (?P<file>.+?):(?P<line>\d+) in (?P<fn>[^,]+), code: (?P<code>.*)$"
)
GRAPH_NODE_ASSIGN = re.compile(r"^\s*(?P<names>\w+(?:\s*,\s*\w+)*)\s*(?::\s*\"[^\"]*\")?\s*=")
# what a Dynamo graph node computes, as the graph prints its right-hand side: a call
# (`torch.relu(x)`, `torch._C._nn.linear(...)`, `h.sin()`: the last name before the
# parenthesis) or a Python operator (`relu * 2`)
GRAPH_NODE_CALL = re.compile(r"=\s*(?:[\w.]+\.)?(?P<fn>\w+)\(")
GRAPH_NODE_OPERATOR = re.compile(
    r"=\s*-?\w+(?:\.\w+)*\s*(?P<op>\*\*|//|==|!=|<=|>=|[-+*/@%<>&|^])\s*[-\w.]+\s*(?:;|$)"
)
GRAPH_OPERATORS = {
    "+": "add", "-": "sub", "*": "mul", "/": "div", "@": "matmul", "**": "pow",
    "//": "floordiv", "%": "remainder", "==": "eq", "!=": "ne", "<": "lt", "<=": "le",
    ">": "gt", ">=": "ge", "&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor",
}  # fmt: skip
# ATen ops a kernel's name holds that the user's code called by another name (a backward
# op is its forward's: `threshold_backward` came from `relu`)
GRAPH_ATEN_ALIASES = {
    "addmm": ("linear", "matmul", "addmm"), "mm": ("linear", "matmul", "mm"),
    "bmm": ("matmul", "bmm", "baddbmm"), "threshold": ("relu",),
    "convolution": ("conv1d", "conv2d", "conv3d", "convolution"),
    "layer_norm": ("layer_norm",), "group_norm": ("group_norm",),
    "batch_norm": ("batch_norm",), "nll_loss": ("nll_loss", "cross_entropy"),
    # (a look's resnet: BatchNorm2d in eval is aten._native_batch_norm_legit_no_training)
    **{f"batch_norm_legit{s}": ("batch_norm",) for s in ("", "_no_training", "_functional")},
    "log_softmax": ("log_softmax", "cross_entropy"),
    # (a look: a kernel fusing F.max_pool2d was placed at the line before it alone)
    # (and the primitive Inductor's decompositions make of it, in the AOT graph)
    **{
        f"max_pool{d}d_with_indices": (f"max_pool{d}d", "low_memory_max_pool_with_offsets")
        for d in (1, 2, 3)
    },
    **{
        f"scaled_dot_product_{kind}_attention{device}": ("scaled_dot_product_attention",)
        for kind in ("flash", "efficient", "cudnn", "fused")
        for device in ("", "_for_cpu")
    },
}  # fmt: skip
# ops a line of any kind may hold (arithmetic, comparisons, what decompositions add): a
# kernel's line is taken from them only when its other ops place nothing
GRAPH_COMMON_OPS = frozenset(
    {"add", "sub", "mul", "div", "sum", "eq", "ne", "lt", "le", "gt", "ge", "where", "neg",
     "abs", "all", "any", "amax", "amin", "max", "min", "exp", "log", "sqrt", "rsqrt",
     "reciprocal", "arange", "scalar_tensor", "fill", "masked_fill", "pow", "lift_fresh"}
)  # fmt: skip
# a generated kernel's parameters: C++'s `kernel(const float* in_ptr0, float* out_ptr0)`,
# Triton's `def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK)`
KERNEL_PARAMS = re.compile(r"(?:\bkernel|def \w+)\(([^)]*)\)")
# the wrapper's buffers: one a call names, one a library call makes, one taken over by another
BUFFER = re.compile(r"\bbuf\d+\b")
BUFFER_MADE = re.compile(r"^\s*(buf\d+) = ")
BUFFER_REUSE = re.compile(
    r"^\s*(?P<new>buf\d+) = (?:reinterpret_tensor\()?(?P<old>buf\d+)\b.*; del (?P=old)\s*# reuse"
)
# an AOT graph's input, as its nodes and Inductor's wrapper name it (inference, training)
GRAPH_INPUT = re.compile(r"\b(?:arg\d+_\d+|primals_\d+)\b")
# a node a library call computes (a generated kernel's work ends where one begins)
GRAPH_LIBRARY_OPS = frozenset(
    {"convolution", "mm", "addmm", "bmm", "baddbmm", "linear", "matmul", "conv1d", "conv2d",
     "conv3d", *GRAPH_ATEN_ALIASES.get("scaled_dot_product_flash_attention_for_cpu", ()),
     *(k for k in GRAPH_ATEN_ALIASES if k.startswith("scaled_dot_product_"))}
)  # fmt: skip
# the first line of a wrapper AOTAutograd made for a backward graph
AOT_BACKWARD_ID = re.compile(r"^# AOT ID: \[[^\]]*_backward'\]", re.M)
# layout ops, which any line may make: no evidence of where a kernel came from
GRAPH_LAYOUT_OPS = frozenset(
    {"view", "unsafe_view", "reshape", "permute", "t", "transpose", "expand", "clone", "unsqueeze",
     "squeeze", "slice", "select", "as_strided", "copy", "contiguous", "alias", "unbind",
     "split", "cat", "full", "empty", "zeros", "ones", "to", "convert_element_type",
     # a generated kernel named for a convolution lays out its input or weight: the
     # convolution is a library call (a look's resnet: such kernels took other blocks' lines)
     "convolution"}
)  # fmt: skip
# a parameter or buffer of a submodule, as the Dynamo graph names it (2.6 - 2.13):
# `l_self_modules_body_modules_0_parameters_weight_` is `self.body[0].weight` (the root is
# `fn` where torch's module wrapper is the frame)
GRAPH_MODULE_STATE = re.compile(
    r"\bl_(?P<root>[a-z]\w*?)_modules_(?P<path>\w+?)_(?:parameters|buffers)_"
)
GRAPH_MODULE_SEP = "_modules_"
# Inductor's provenance node mappings (2.10+): kernel call `NAME:INDEX` -> post-grad nodes,
# post-grad node -> pre-grad (Dynamo graph) nodes
PROVENANCE_NODE_MAPPINGS = "inductor_provenance_tracking_node_mappings"
PROVENANCE_KERNEL_TO_POST = "cppCodeToPost"  # Triton kernels too, under this name
PROVENANCE_POST_TO_PRE = "postToPre"
ATEN_TARGET = re.compile(r"torch\.ops\.aten\.(\w+)\.")
# an AOT graph node's op, ATen's or a primitive Inductor decomposed to
OP_TARGET = re.compile(r"torch\.ops\.(?:aten|prims)\.(\w+)\.")
TRITON_KINDS = {
    "triton_poi": "pointwise",
    "triton_red": "reduction",
    "triton_per": "persistent_reduction",
    "triton_tem": "template",
    "triton_tma": "template",
}
# A generated kernel's body, line by line: a value it computes (`auto tmp4 = tmp0 / tmp3;`
# in C++, `tmp4 = tmp0 / tmp3` in Triton) against one it only moves: a load, a conversion,
# a broadcast or a constant. A kernel with no computed value copies data (a layout change
# for a library call, e.g. the input of extern_kernels.convolution transposed).
KERNEL_VALUE = re.compile(r"^\s*(?:auto\s+)?tmp\d+\s*=\s*(?P<rhs>.+?);?\s*$", re.M)
KERNEL_MOVES = re.compile(
    r"^(?:at::vec::Vectorized<\w+>::loadu\(|(?:in|out)_ptr\d+\[|tl\.load\(|"
    r"c10::convert<\w+>\(tmp\d+\)$|static_cast<\w+>\([-\d.eEL]+\)$|"
    r"at::vec::Vectorized<\w+>\(tmp\d+\)$|tmp\d+\.to\(|tl\.full\(|"
    r"tl\.broadcast_to\(tmp\d+|tmp\d+$|[-\d.eEL]+$)"
)
KERNEL_REDUCES = re.compile(r"\btmp_acc\d|\btl\.(?:sum|max|min|reduce)\(|welford")
# what a computed value does, for a kernel whose name and comment name no op (`cpp_fused_0`)
KERNEL_BODY_OPS = [
    (re.compile(r"\btmp\d+\s*/\s*tmp\d+|\bdiv\("), "div"),
    (re.compile(r"\btmp\d+\s*\*\s*tmp\d+"), "mul"),
    (re.compile(r"\btmp\d+\s*\+\s*tmp\d+"), "add"),
    (re.compile(r"\btmp\d+\s*-\s*tmp\d+"), "sub"),
    (re.compile(r"clamp_min\(|maximum\("), "relu"),
    (re.compile(r"\bexp\("), "exp"),
    (re.compile(r"\btanh\("), "tanh"),
    (re.compile(r"\berf\("), "erf"),
    (re.compile(r"\brsqrt\("), "rsqrt"),
    (re.compile(r"\bsqrt\("), "sqrt"),
    (re.compile(r"\blog\("), "log"),
    (re.compile(r"sum_masked_reduce|tl\.sum\("), "sum"),
    (re.compile(r"max_masked_reduce|max_propagate_nan|tl\.max\("), "max"),
]
KERNEL_EXT = {
    "triton": ".py",
    "cpp_pybinding": ".cpp",
    "cpp": ".cpp",
    "cuda": ".cu",
    "halide": ".py",
}
# --- torch.export and AOTInductor -----------------------------------------------------------

# AOTInductor's C++ (graph_dump records `inductor_aot_code` on 2.6; `inductor_aot_wrapper_code`
# and `inductor_aot_kernel_code` on 2.8+): a kernel is an `extern "C"` function with a body
AOT_CODE_DUMP = re.compile(r"^inductor_aot(_\w+)?_code$")
AOT_KERNEL_DEFINITION = re.compile(r'^extern "C"\s+void\s+(?P<name>\w+)\s*\([^;{]*\)\s*\{', re.M)
# a library op the AOT wrapper calls: `aoti_torch_cpu_addmm_out(` -> aten.addmm
AOT_EXTERN_CALL = re.compile(r"\baoti_torch_(?:cpu|cuda|xpu|mps)_(?P<op>\w+?)(?:_out)?\(")
# a file of torch.export in a trace's interned paths: the job ran torch.export
EXPORT_PATH = re.compile(r"/torch/_?export/")
# the graph make_fx had traced when a (non-strict) export failed (artifact make_fx_fail_partial)
EXPORT_FAILED_PARTIAL = "make_fx_fail_partial"
EXPORT_DATA_DEPENDENT_FIX = (
    "Export needs one graph for every input: a Python `if` on a tensor's value can't be "
    "exported. Use torch.cond(pred, true_fn, false_fn, operands) for the branch, or, where "
    "the value is known to hold, torch._check(...) on it before the branch."
)


# the `_fused_` infix and numeric suffix of a fused kernel's name
FUSED_INFIX = "_fused_"
KERNEL_SUFFIX = re.compile(r"_\d+$")


# why torch restarted a compile after its backend had the graph (`restart_reasons` of
# compilation_metrics hold the exception's class or torch's words)
RESTART_WORDS = {
    "TensorifyScalarRestartAnalysis": (
        "a Python float it tried to keep dynamic had to be a constant"
    ),
}


def restart_words(reasons: list[str]) -> str:
    """Torch's restart reasons in words: a known one explained, another as torch put it."""
    for r in reasons:
        for name, words in RESTART_WORDS.items():
            if name in r:
                return words
    text = next((r.strip().strip("'\"") for r in reasons if r.strip()), "")
    return f"torch: {text}" if text else "torch gave no reason"


def float_specialised(reasons: list[str]) -> bool:
    """The compile restarted to bake in a float it had made dynamic: later values of it
    compile again."""
    return any("TensorifyScalarRestartAnalysis" in r for r in reasons)


# --- the guard tree (`dynamo_cpp_guards_str`) ---------------------------------------------

# a manager: `GuardManager: source=X, accessed_by=...`, a dict's `DictGuardManager: ...`, and
# its keys' and values' `KeyManager: GuardManager: source=X, type=...`
GUARD_TREE_SOURCE = re.compile(
    r"\+- (?:\w+Manager: )?\w*GuardManager: source=(?P<src>.+?), (?:accessed_by|type)="
)
GUARD_TREE_LEAF = re.compile(r"\+- (?P<kind>[A-Z_]+): (?P<expr>.+?)(?:\s+# .*)?$")
# the leaves that pin a value (what a new call's value can fail)
VALUE_GUARDS = frozenset(
    ("NONE_MATCH", "EQUALS_MATCH", "ID_MATCH", "TENSOR_MATCH", "TYPE_MATCH", "LENGTH_CHECK",
     "DICT_LENGTH", "NOT_NONE_MATCH", "TRUE_MATCH", "FALSE_MATCH")
)  # fmt: skip


# a size's guard in a compile's own tree, the text a failed one has in a recompile reason
# (`LAMBDA_GUARD: 3 <= L['x'].size()[0] <= 15  # (_inductor/codegen/cpp.py:2397 in ...)`)
GUARD_TREE_SIZE = re.compile(r"\+- LAMBDA_GUARD: (?P<text>.*\.size\(\)\[\d+\].*)$")
SIZE_OF = re.compile(
    r"(?P<src>(?:[LG]\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+|\[[^\]]*\])*?)\.size\(\)\[(?P<i>\d+)\]"
)
ARITHMETIC = re.compile(r"[\d\s<>=!*+\-/%()]+")


def size_guards(tree: str) -> list[str]:
    """The guards on sizes a compile's tree holds, each as torch's text with its sites."""
    return [m["text"] for line in tree.splitlines() if (m := GUARD_TREE_SIZE.search(line))]


def sizes_in_words(expr: str) -> str:
    """A guard's sizes as the report names them: `3 <= L['x'].size()[0]` -> `3 <= x dim 0`."""
    return SIZE_OF.sub(lambda m: f"{source_name(m['src'])} dim {m['i']}", expr)


# a bound that still holds at this many times a size seen splits none near it (32-bit
# indexing's `8192*x dim 1 <= 2147483647`)
FAR = 64


def splits_near(guard: str, name: str, dim: int, size: int) -> bool:
    """A guard on sizes that shuts out `name` dim `dim` somewhere below FAR times `size`."""
    return size_holds(guard, name, dim, FAR * size) is False


def size_holds(guard: str, name: str, dim: int, size: int) -> bool | None:
    """Whether a guard on sizes holds with `name` dim `dim` at `size`; None where it names
    another size, or reads as more than arithmetic."""
    expr = guard.split("  #", 1)[0]
    left = SIZE_OF.sub(
        lambda m: str(size) if (source_name(m["src"]), int(m["i"])) == (name, dim) else m[0],
        expr,
    )
    if left == expr or not ARITHMETIC.fullmatch(left) or "**" in left:
        return None
    try:
        return bool(eval(left, {"__builtins__": {}}))  # digits and operators alone
    except (SyntaxError, ArithmeticError):
        return None


def guard_values(tree: str) -> dict[str, frozenset[str]]:
    """A compile's guard tree as each source's value guards (`KIND: expr`), for comparing
    the guards of a cached graph with those of the graph compiled for the call that
    failed them: a source whose value guards differ changed between the two calls."""
    out: dict[str, set[str]] = {}
    held: list[tuple[int, str]] = []  # the managers above a line: (depth, source)
    for line in tree.splitlines():
        depth = line.find("+- ")
        if depth < 0:
            continue  # a header, a blank line, an expression's next line: no node
        while held and held[-1][0] >= depth:
            held.pop()  # a line at a manager's depth or above is no longer under it
        if m := GUARD_TREE_SOURCE.search(line):
            held.append((depth, m["src"]))
        elif (m := GUARD_TREE_LEAF.search(line)) and held and m["kind"] in VALUE_GUARDS:
            out.setdefault(held[-1][1], set()).add(f"{m['kind']}: {m['expr'].strip()}")
    return {k: frozenset(v) for k, v in out.items()}


def guard_value(leaves: frozenset[str]) -> str:
    """The value a source's guards pin, in a few words: `None`, `'x'`, `size 2x16` (`size
    2xN with dim 1 dynamic`), `a 0-d tensor`, `length 3`; "" where none says."""
    for leaf in sorted(leaves):
        kind, _, expr = leaf.partition(": ")
        if kind == "NONE_MATCH":
            return "None"
        if kind == "EQUALS_MATCH":
            return expr.split(" == ", 1)[-1]
        if kind == "TENSOR_MATCH" and (m := TENSOR_SIZE.search(expr)):
            dims = [d.strip() for d in m[1].split(",") if d.strip()]
            if not dims:
                return "a 0-d tensor"
            free = dynamic_dims(leaves)
            # a letter of its own for each dynamic dim ("NxN" read as a square)
            letters = iter("NMKLPQ")
            said = "size " + "x".join(next(letters, "N") if d == "None" else d for d in dims)
            if free:  # ("anyx3" read as jargon)
                said += f" with dim{'s' * (len(free) > 1)} {', '.join(map(str, free))} dynamic"
            return said
        if kind in ("LENGTH_CHECK", "DICT_LENGTH") and (m := LENGTH.search(expr)):
            return f"length {m[1]}"
    return ""


def dynamic_dims(leaves: frozenset[str]) -> list[int]:
    """The dims a tensor's guard leaves free (`size=[2, None]`: dim 1): dynamic in its graph."""
    for leaf in leaves:
        kind, _, expr = leaf.partition(": ")
        if kind == "TENSOR_MATCH" and (m := TENSOR_SIZE.search(expr)):
            dims = [d.strip() for d in m[1].split(",") if d.strip()]
            return [i for i, d in enumerate(dims) if d == "None"]
    return []


TENSOR_SIZE = re.compile(r"size=\[([^\]]*)\]")
LENGTH = re.compile(r"len\(.*\)\s*==\s*(\d+)")
# what a tensor's guard pins beside its size (check_tensor's arguments)
TENSOR_FIELDS = {
    "dtype": re.compile(r"\b(torch\.\w+)"),
    "device": re.compile(r"device=([^,)]+)"),
    "requires_grad": re.compile(r"requires_grad=(\w+)"),
}
TENSOR_STRIDE = re.compile(r"stride=\[([^\]]*)\]")


def guard_change(old: frozenset[str], new: frozenset[str]) -> str:
    """What changed between two sets of a source's value guards, in a few words: `size 64 →
    size 40`, `requires_grad False → True`, `another object` (an identity guard), `another
    type`; `another value` where none of those says it."""
    a, b = guard_value(old), guard_value(new)
    if a != b:
        return f"{a or 'another value'} → {b or 'another value'}"
    tensors = [_tensor_fields(x) for x in (old, new)]
    moved = [
        f"{k} {tensors[0][k]} → {tensors[1][k]}"
        for k in TENSOR_FIELDS
        if tensors[0].get(k) != tensors[1].get(k) and k in tensors[0] and k in tensors[1]
    ]
    if moved:
        return "; ".join(moved)
    strides = [_tensor_stride(x) for x in (old, new)]
    if strides[0] and strides[1] and strides[0] != strides[1]:
        return "another layout (its strides)"  # (their numbers follow the input's sizes)
    kinds = {leaf.partition(": ")[0] for leaf in old ^ new}
    if "ID_MATCH" in kinds:
        return "another object"
    if "TYPE_MATCH" in kinds:
        return "another type"
    return "another value"


def _tensor_stride(leaves: frozenset[str]) -> str:
    for leaf in sorted(leaves):
        kind, _, expr = leaf.partition(": ")
        if kind == "TENSOR_MATCH" and (m := TENSOR_STRIDE.search(expr)):
            return m[1]
    return ""


TENSOR_SIZE = re.compile(r"size=\[([^\]]*)\]")


def values_apart(old: frozenset[str], new: frozenset[str]) -> int:
    """How far a source's value guards are apart: for a tensor, how many of its dtype,
    device, requires_grad, sizes and strides differ (a DCGAN's discriminator input of the
    last, smaller batch is one apart from the cached graph of its requires_grad, two from the
    other's: torch names the newer's requires_grad first); 1 for any other change."""
    a, b = _tensor_fields(old), _tensor_fields(new)
    if not a or not b:
        return 1
    fields = sum(a.get(k) != b.get(k) for k in TENSOR_FIELDS)
    for rx in (TENSOR_SIZE, TENSOR_STRIDE):
        x, y = (rx.search(_tensor(leaves)) for leaves in (old, new))
        fields += x is not None and y is not None and x[1] != y[1]
    return max(1, fields)


def _tensor(leaves: frozenset[str]) -> str:
    return next((leaf for leaf in sorted(leaves) if leaf.startswith("TENSOR_MATCH:")), "")


def _tensor_fields(leaves: frozenset[str]) -> dict[str, str]:
    for leaf in sorted(leaves):
        kind, _, expr = leaf.partition(": ")
        if kind == "TENSOR_MATCH":
            return {k: m[1].strip() for k, rx in TENSOR_FIELDS.items() if (m := rx.search(expr))}
    return {}
