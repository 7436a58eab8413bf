"""Typer's help and its parameters, adjusted where a release of it does worse than the
command line needs: plain argument names in the help, and string options passed through
without pydantic's coercion (fast `render`). app.py applies both before it declares a
command."""

from __future__ import annotations

import sys
from typing import Any

import typer


def plain_help() -> None:
    """Typer 0.2x writes a required argument as `{MODEL}` in the usage line and every
    argument's Python type (`<str>`) in the help: show plain names, as man pages do."""
    argument = getattr(getattr(typer, "core", None), "TyperArgument", None)
    if argument is None:
        return
    if hasattr(argument, "_usage_display_name"):

        def usage_name(self: typer.core.TyperArgument) -> str:
            name = str(self.display_name_raw)
            return (name if self.required else f"[{name}]") + ("..." if self.nargs != 1 else "")

        argument._usage_display_name = usage_name
    if hasattr(argument, "display_type_rich"):
        argument.display_type_rich = lambda self, ctx: None


PLAIN: dict[Any, type] = {str: str, str | None: str, bool: bool, bool | None: bool}


def plain_strings() -> None:
    """typer 0.29 coerces every parameter through a pydantic validator, and importing
    pydantic is 0.1 s of a 0.3 s `render`. A string option needs no coercion - the command
    line is strings, and a flag a bool - so those pass through; numbers, lists and paths
    still go through typer's own."""
    core = getattr(typer, "core", None)
    build = getattr(core, "build_runtime_param", None)
    plain = getattr(sys.modules.get("typer._coercion"), "PassThroughRuntimeParam", None)
    if build is None or plain is None:
        return

    def build_runtime_param(descriptor: Any) -> Any:
        info = descriptor.parameter_info
        try:
            kind = PLAIN.get(descriptor.annotation)
        except TypeError:  # an unhashable annotation: not a plain one
            kind = None
        if (
            kind is not None
            and getattr(info, "parser", None) is None
            and not getattr(descriptor, "is_file", True)
            and not getattr(descriptor, "is_path", True)
            and getattr(descriptor, "choices", ()) is None
        ):
            return plain(parameter_info=info, annotation=kind)
        return build(descriptor)

    core.build_runtime_param = build_runtime_param  # type: ignore[union-attr]


def plain_usage_errors() -> None:
    """click's usage errors (a bad value of a typed option, an unknown option) in the
    form of every other error here, `error: ...` and the fix on the next line, not click's
    four-line Usage/Try/Error block (a look read the two forms side by side)."""
    import importlib

    def show(self: Any, file: Any = None) -> None:
        command = self.ctx.command_path if self.ctx is not None else "compilediag"
        message = self.format_message().rstrip(".")
        sys.stderr.write(f"error: {message}.\n{_elsewhere(self)}See `{command} --help`.\n")

    # click's, and the copy typer 0.2x carries of it (typer._click)
    for name in ("click.exceptions", "typer._click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        module.UsageError.show = show


def _elsewhere(error: Any) -> str:
    """For an option this command does not have, the commands that have it (a look's
    `explain --budget`: an option of `run`)."""
    name, ctx = getattr(error, "option_name", None), getattr(error, "ctx", None)
    if not name or ctx is None:
        return ""
    root, root_name = ctx.find_root().command, ctx.find_root().info_name or "compilediag"
    owners = [
        f"`{root_name} {sub}`"
        for sub, cmd in sorted(getattr(root, "commands", {}).items())
        if sub != ctx.info_name and any(name in p.opts for p in cmd.params)
    ]
    return f"{name} is an option of {' and '.join(owners)}.\n" if owners else ""
