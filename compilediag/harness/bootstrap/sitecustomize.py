"""compilediag's bootstrap, first on the PYTHONPATH of a `compilediag run` job.

Python imports `sitecustomize` at start-up; this one arms a hook that loads compilediag's
runtime probe when (and only when) the process imports torch._dynamo (and, for a run of
`--try-fixes`, one that makes its remedy once torch is imported), then runs the
sitecustomize the user already had, as Python would have without us. A process that
never compiles pays for this file alone.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


class _OnImport(importlib.abc.MetaPathFinder):
    """Finds module `name` through the other finders and calls `then()` once it has been
    executed; then steps aside."""

    def __init__(self, name, then):  # type: ignore[no-untyped-def]
        self.name, self.then = name, then

    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        loader = spec.loader
        execute = loader.exec_module
        then = self.then

        def exec_module(module):  # type: ignore[no-untyped-def]
            execute(module)
            then()

        loader.exec_module = exec_module
        return spec


def _install_probe():  # type: ignore[no-untyped-def]
    try:
        import _compilediag_runtime

        _compilediag_runtime.install_from_env()
    except Exception as e:  # the job runs on whatever happens to the probe
        sys.stderr.write(f"compilediag: runtime probe not installed: {e}\n")


def _make_remedy():  # type: ignore[no-untyped-def]
    """`run --try-fixes`: the remedy of this run, once torch is imported."""
    try:
        from _compilediag_runtime import remedies

        remedies.at_torch_import()
    except Exception as e:  # the run then measures the job as it is, and says so
        sys.stderr.write(f"compilediag: remedy not made: {e}\n")


def _chain() -> None:
    """Run the next `sitecustomize` on sys.path, the one Python would have imported."""
    here = os.path.normcase(os.path.realpath(_HERE))
    rest = [p for p in sys.path if os.path.normcase(os.path.realpath(p or ".")) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if os.environ.get("COMPILEDIAG_RUNTIME_DIR"):
    sys.meta_path.insert(0, _OnImport("torch._dynamo", _install_probe))
    if os.environ.get("COMPILEDIAG_REMEDY"):
        sys.meta_path.insert(0, _OnImport("torch", _make_remedy))
_chain()
