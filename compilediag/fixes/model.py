"""A fix, the break as the rules see it, and the rule registry."""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from compilediag.report.vocabulary import BreakCause
from compilediag.report.vocabulary import FixSource as Source

# effects, in the words a report shows
REMOVES = "removes the break"
MOVES_OUT = "moves the call out of the compiled region; the break is gone"
GENERIC_TEXT = "See the explanation and hints above, and the linked page where there is one."


@dataclass(frozen=True)
class Fix:
    """One fix for one break."""

    cause: BreakCause
    text: str  # what to change
    effect: str  # what the change does: "removes the break", "the print runs after ..."
    # torch._dynamo.config settings that apply the fix, when it is a config-level one;
    # a value "fn:module.qualname" is that function, added to the setting (a set)
    config: Mapping[str, object] = field(default_factory=dict)
    code_edit: bool = True  # the fix needs an edit of the user's code
    # the edit is of the user's call into a library (an argument it takes), not of the
    # library's line torch broke on: said as it is, not as the library's side
    at_call: bool = False
    source: Source = Source.COMPILEDIAG
    gb_id: str | None = None

    @property
    def specific(self) -> bool:
        """compilediag's own fix (not torch's hints, not the generic advice)."""
        return self.source == Source.COMPILEDIAG

    @property
    def suggestion(self) -> str:
        """The fix as one line of a report."""
        if self.source == Source.COMPILEDIAG:
            return f"{self.text} Expected: {self.effect}."
        return self.text

    def __post_init__(self) -> None:  # frozen: the settings too
        object.__setattr__(self, "config", MappingProxyType(dict(self.config)))

    def patch(self) -> dict[str, Any]:
        """Arguments for `torch._dynamo.config.patch` that apply this fix (needs torch)."""
        return config_patch(self.config)


GENERIC = Fix(BreakCause.OTHER, GENERIC_TEXT, "unknown", code_edit=True, source=Source.GENERIC)


def config_patch(config: Mapping[str, object]) -> dict[str, Any]:
    """`Fix.config` as arguments for `torch._dynamo.config.patch`: a "fn:" value becomes
    the setting's current set with that function added."""
    import torch

    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, str) and value.startswith("fn:"):
            current = set(getattr(torch._dynamo.config, key))
            out[key] = current | {resolve_function(value[3:])}
        else:
            out[key] = value
    return out


def resolve_function(path: str) -> Any:
    """`logging.Logger.info` -> the function: the longest importable module, then attributes."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"no module in {path!r}")


# --- the break, as the rules see it ----------------------------------------------------


@dataclass(frozen=True)
class Break:
    gb_id: str | None
    gb_type: str
    explanation: str
    hints: tuple[str, ...]
    code: str
    library_file: str | None
    torch_version: str = ""  # the torch that broke: advice names only what it has

    @property
    def text(self) -> str:
        return " ".join((self.gb_type, self.explanation, self.code))


@dataclass(frozen=True)
class Rule:
    gb_types: tuple[str, ...]
    make: Callable[[Break], Fix]


RULES: dict[str, Rule] = {}


def rule(gb_id: str, *gb_types: str) -> Callable[[Callable[[Break], Fix]], Callable[[Break], Fix]]:
    def register(fn: Callable[[Break], Fix]) -> Callable[[Break], Fix]:
        RULES[gb_id] = Rule(gb_types, fn)
        return fn

    return register


def fix(b: Break, cause: BreakCause, text: str, effect: str, **kw: Any) -> Fix:
    return Fix(cause, text, effect, gb_id=b.gb_id, **kw)


def quoted(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    return m.group(1) if m else ""


GUARD = "guard it with `if not torch.compiler.is_compiling():` (it then runs only in eager)"
