"""`run --try-fixes`' caches (#76): its runs compile with a copy of torch's caches as the job's
run left them, shared by the runs; the user's caches are read, never written. Before, each
run compiled in an empty cache, which no record of the job's warm run could forecast (an
eleventh look: "about 10 s a run", 22 s taken)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from compilediag.cli.commands.again.job_caches import LINK_FROM_BYTES, copied_caches, user_caches


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(folder)): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_mtime_ns,
        )
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_the_caches_are_those_torch_would_use() -> None:
    """The folder Inductor uses unless told otherwise is torch's own default; Triton's is
    under it unless TRITON_CACHE_DIR names one."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    }
    assert user_caches(env) == {"TORCHINDUCTOR_CACHE_DIR": Path(default_cache_dir())}
    named = user_caches({**env, "TORCHINDUCTOR_CACHE_DIR": "/x/i", "TRITON_CACHE_DIR": "/x/t"})
    assert named == {"TORCHINDUCTOR_CACHE_DIR": Path("/x/i"), "TRITON_CACHE_DIR": Path("/x/t")}


def test_the_runs_write_into_a_copy_and_the_users_caches_stay_as_they_were(tmp_path: Path) -> None:
    """A source torch appends to, a built kernel, a lock: the copy holds the first two (the
    kernel linked, the source copied); what the runs write there (an append, an atomic
    replace, a new entry) leaves the user's files as they were, and the copy goes."""
    theirs = tmp_path / "inductor"
    (theirs / "ab").mkdir(parents=True)
    (theirs / "ab" / "kernel.py").write_text("# a kernel's source\n")
    (theirs / "ab" / "kernel.so").write_bytes(b"\0" * (LINK_FROM_BYTES + 1))
    (theirs / "ab" / "kernel.lock").write_text("")
    before = _snapshot(theirs)
    with copied_caches({"TORCHINDUCTOR_CACHE_DIR": str(theirs)}) as env:
        mine = Path(env["TORCHINDUCTOR_CACHE_DIR"])
        assert "TRITON_CACHE_DIR" not in env  # (Triton's stays under Inductor's, as in the job)
        assert sorted(p.name for p in (mine / "ab").iterdir()) == ["kernel.py", "kernel.so"]
        assert (mine / "ab" / "kernel.so").stat().st_ino == (
            theirs / "ab" / "kernel.so"
        ).stat().st_ino
        assert (mine / "ab" / "kernel.py").stat().st_ino != (
            theirs / "ab" / "kernel.py"
        ).stat().st_ino
        with open(mine / "ab" / "kernel.py", "a") as f:
            f.write("// compile cmd\n")
        (mine / "ab" / "new.so").write_bytes(b"\1" * (LINK_FROM_BYTES + 1))
        os.replace(mine / "ab" / "new.so", mine / "ab" / "kernel.so")
        (mine / "cd").mkdir()
        (mine / "cd" / "entry").write_text("a remedy's graph")
    assert _snapshot(theirs) == before
    assert not mine.exists()


def test_a_job_with_no_cache_yet_gets_empty_folders(tmp_path: Path) -> None:
    with copied_caches({"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "none")}) as env:
        assert Path(env["TORCHINDUCTOR_CACHE_DIR"]).is_dir()
        assert not list(Path(env["TORCHINDUCTOR_CACHE_DIR"]).iterdir())
    assert not (tmp_path / "none").exists()
